package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
)

// DB offers the store's writes the way tests set up and exercise them: each
// call its own unkeyed unit of work (postgres.DB.Write without a key),
// committing as it returns. The events it commits are not handed back: a
// test that needs them runs the write through Write or MustWrite.
var _ jobboard.Writes = (*DB)(nil)

// MustWrite runs fn as one unkeyed unit of work of db and returns the
// events it committed. It fails tb on fn's error.
func MustWrite(tb testing.TB, db *postgres.DB, fn func(st jobboard.Writes) error) []jobboard.Event {
	tb.Helper()
	_, evs, err := Write(context.Background(), db, func(st jobboard.Writes) (struct{}, error) { return struct{}{}, fn(st) })
	if err != nil {
		tb.Fatalf("write: %v", err)
	}
	return evs
}

// Write runs one write as its own unkeyed unit of work of db, and returns
// the write's result and the events the unit committed.
func Write[T any](ctx context.Context, db *postgres.DB, write func(st jobboard.Writes) (T, error)) (T, []jobboard.Event, error) {
	var v T
	evs, err := db.Write(ctx, nil, func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
		var err error
		v, err = write(st)
		return nil, err
	})
	return v, evs, err
}

// unkeyed is Write without the events.
func unkeyed[T any](ctx context.Context, db *DB, write func(st jobboard.Writes) (T, error)) (T, error) {
	v, _, err := Write(ctx, db.DB, write)
	return v, err
}

// CreateCompany is jobboard.Writes' CreateCompany, as its own unit of work.
func (db *DB) CreateCompany(ctx context.Context, a jobboard.Actor, c jobboard.NewCompany) (jobboard.Company, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.Company, error) { return st.CreateCompany(ctx, a, c) })
}

// CreateJob is jobboard.Writes' CreateJob, as its own unit of work.
func (db *DB) CreateJob(ctx context.Context, a jobboard.Actor, companyID int64, j jobboard.NewJob) (jobboard.Job, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.Job, error) { return st.CreateJob(ctx, a, companyID, j) })
}

// UpdateJob is jobboard.Writes' UpdateJob, as its own unit of work.
func (db *DB) UpdateJob(ctx context.Context, a jobboard.Actor, id int64, p jobboard.JobPatch) (jobboard.Job, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.Job, error) { return st.UpdateJob(ctx, a, id, p) })
}

// Apply is jobboard.Writes' Apply, as its own unit of work.
func (db *DB) Apply(ctx context.Context, a jobboard.Actor, jobID int64, n jobboard.NewApplication) (jobboard.Application, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.Application, error) { return st.Apply(ctx, a, jobID, n) })
}

// ChangeStatus is jobboard.Writes' ChangeStatus, as its own unit of work.
func (db *DB) ChangeStatus(ctx context.Context, a jobboard.Actor, id int64, c jobboard.StatusChange) (jobboard.Application, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.Application, error) { return st.ChangeStatus(ctx, a, id, c) })
}

// registered is Register's answer but for its error.
type registered struct {
	user   jobboard.User
	queued bool
}

// Register is jobboard.Writes' Register, as its own unit of work.
func (db *DB) Register(ctx context.Context, r jobboard.Registration, passwordHash string, p jobboard.VerificationPolicy, now time.Time) (jobboard.User, bool, error) {
	reg, err := unkeyed(ctx, db, func(st jobboard.Writes) (registered, error) {
		u, queued, err := st.Register(ctx, r, passwordHash, p, now)
		return registered{u, queued}, err
	})
	return reg.user, reg.queued, err
}

// RequestVerification is jobboard.Writes' RequestVerification, as its own
// unit of work.
func (db *DB) RequestVerification(ctx context.Context, userID int64, p jobboard.VerificationPolicy, now time.Time) error {
	_, err := unkeyed(ctx, db, func(st jobboard.Writes) (struct{}, error) {
		return struct{}{}, st.RequestVerification(ctx, userID, p, now)
	})
	return err
}

// VerifyEmail is jobboard.Writes' VerifyEmail, as its own unit of work.
func (db *DB) VerifyEmail(ctx context.Context, tokenHash []byte, now time.Time) (jobboard.User, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.User, error) { return st.VerifyEmail(ctx, tokenHash, now) })
}

// RequestPasswordReset is jobboard.Writes' RequestPasswordReset, as its own
// unit of work.
func (db *DB) RequestPasswordReset(ctx context.Context, email string, p jobboard.VerificationPolicy, now time.Time) (bool, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (bool, error) { return st.RequestPasswordReset(ctx, email, p, now) })
}

// ResetPassword is jobboard.Writes' ResetPassword, as its own unit of work.
func (db *DB) ResetPassword(ctx context.Context, tokenHash []byte, passwordHash string, now time.Time) (jobboard.User, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.User, error) {
		return st.ResetPassword(ctx, tokenHash, passwordHash, now)
	})
}

// CreateWebhookEndpoint is jobboard.Writes' CreateWebhookEndpoint, as its
// own unit of work.
func (db *DB) CreateWebhookEndpoint(ctx context.Context, a jobboard.Actor, companyID int64, n jobboard.NewWebhookEndpoint, sealedSecret []byte) (jobboard.WebhookEndpoint, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.WebhookEndpoint, error) {
		return st.CreateWebhookEndpoint(ctx, a, companyID, n, sealedSecret)
	})
}

// UpdateWebhookEndpoint is jobboard.Writes' UpdateWebhookEndpoint, as its
// own unit of work.
func (db *DB) UpdateWebhookEndpoint(ctx context.Context, a jobboard.Actor, companyID, id int64, p jobboard.WebhookEndpointPatch) (jobboard.WebhookEndpoint, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.WebhookEndpoint, error) {
		return st.UpdateWebhookEndpoint(ctx, a, companyID, id, p)
	})
}

// RotateWebhookSecret is jobboard.Writes' RotateWebhookSecret, as its own
// unit of work.
func (db *DB) RotateWebhookSecret(ctx context.Context, a jobboard.Actor, companyID, id int64, sealedSecret []byte, overlap time.Duration) (jobboard.WebhookEndpoint, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.WebhookEndpoint, error) {
		return st.RotateWebhookSecret(ctx, a, companyID, id, sealedSecret, overlap)
	})
}

// ReplayWebhookDelivery is jobboard.Writes' ReplayWebhookDelivery, as its
// own unit of work.
func (db *DB) ReplayWebhookDelivery(ctx context.Context, a jobboard.Actor, companyID, endpointID, deliveryID int64, p jobboard.WebhookDispatchPolicy) (jobboard.WebhookDelivery, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.WebhookDelivery, error) {
		return st.ReplayWebhookDelivery(ctx, a, companyID, endpointID, deliveryID, p)
	})
}

// PingWebhookEndpoint is jobboard.Writes' PingWebhookEndpoint, as its own
// unit of work.
func (db *DB) PingWebhookEndpoint(ctx context.Context, a jobboard.Actor, companyID, endpointID int64, p jobboard.WebhookDispatchPolicy) (jobboard.WebhookDelivery, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.WebhookDelivery, error) {
		return st.PingWebhookEndpoint(ctx, a, companyID, endpointID, p)
	})
}

// DeleteWebhookEndpoint is jobboard.Writes' DeleteWebhookEndpoint, as its
// own unit of work.
func (db *DB) DeleteWebhookEndpoint(ctx context.Context, a jobboard.Actor, companyID, id int64) error {
	_, err := unkeyed(ctx, db, func(st jobboard.Writes) (struct{}, error) {
		return struct{}{}, st.DeleteWebhookEndpoint(ctx, a, companyID, id)
	})
	return err
}

// WithdrawComplaint is jobboard.Writes' WithdrawComplaint, as its own unit
// of work.
func (db *DB) WithdrawComplaint(ctx context.Context, a jobboard.Actor) (jobboard.AddressDelivery, error) {
	return unkeyed(ctx, db, func(st jobboard.Writes) (jobboard.AddressDelivery, error) { return st.WithdrawComplaint(ctx, a) })
}
