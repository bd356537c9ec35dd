package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// suppress applies a hard bounce or a complaint about addr, as the
// feedback function would.
func suppress(t *testing.T, e *workertest.Env, kind jobboard.FeedbackKind, addr string) {
	t.Helper()
	id := uuid.NewString()
	if _, err := e.DB.ApplyFeedback(context.Background(), jobboard.Feedback{
		ID: string(kind) + ":" + id, Kind: kind, MessageID: "ses-" + id, Recipients: []string{addr}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// A status email to an address that hard-bounced or complained is not
// sent: the claim is finished as suppressed (INFO, a metric), while the
// same change for a deliverable address is emailed.
func TestStatusEmailToSuppressedAddressIsNotSent(t *testing.T) {
	t.Parallel()
	for _, kind := range []jobboard.FeedbackKind{jobboard.FeedbackBounced, jobboard.FeedbackComplained} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			e := workertest.New(t, workertest.Options{})
			gone, fine := e.NewApp(t), e.NewApp(t)
			suppress(t, e, kind, gone.CandidateEmail)
			goneEv, fineEv := gone.Event(), fine.Event()
			e.SendBody(t, workertest.Body(t, goneEv))
			e.SendBody(t, workertest.Body(t, fineEv))
			e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)

			if got := e.EmailsTo(t, gone.CandidateEmail); len(got) != 0 {
				t.Errorf("%d emails to the suppressed %s, want none", len(got), gone.CandidateEmail)
			}
			if got := e.EmailsTo(t, fine.CandidateEmail); len(got) != 1 {
				t.Errorf("%d emails to %s, want 1", len(got), fine.CandidateEmail)
			}
			wantClaim(t, e, goneEv.EventID, "suppressed")
			wantClaim(t, e, fineEv.EventID, "sent")
			var logged bool
			for _, l := range e.Logs.Records(t) {
				if l["event_id"] == goneEv.EventID {
					logged = l["outcome"] == "suppressed" && l["level"] == "INFO"
				}
			}
			if !logged {
				t.Errorf("no INFO line with outcome suppressed for %s:\n%v", goneEv.EventID, e.Logs.Records(t))
			}
			var suppressed float64
			for _, m := range e.Logs.Metrics(t) {
				if v, ok := m["SuppressedRecipients"].(float64); ok {
					suppressed += v
				}
			}
			if suppressed != 1 {
				t.Errorf("SuppressedRecipients = %v, want 1", suppressed)
			}
		})
	}
}

// Following a new verification link lifts a bounce suppression: the
// account (verified before the bounce) may ask for the link again, the
// link is sent despite the bounce, and once followed the next status
// email goes out.
func TestVerificationLiftsABounceSuppression(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	app := e.NewApp(t)
	suppress(t, e, jobboard.FeedbackBounced, app.CandidateEmail)
	h := e.Handler(t, e.Sender)

	before := app.Event()
	e.SendBody(t, workertest.Body(t, before))
	e.Drain(t, e.Poller(h), 30*time.Second)
	wantClaim(t, e, before.EventID, "suppressed")

	_, evs, err := pgtest.Write(ctx, e.DB, func(st jobboard.Writes) (struct{}, error) {
		return struct{}{}, st.RequestVerification(ctx, app.Candidate.UserID, jobboard.DefaultVerificationPolicy, time.Now())
	})
	if err != nil || len(evs) != 1 {
		t.Fatalf("RequestVerification of a bounced address: %+v, %v", evs, err)
	}
	ev := evs[0]
	e.SendBody(t, workertest.Body(t, ev))
	e.Drain(t, e.Poller(h), 30*time.Second)
	emails := e.EmailsTo(t, app.CandidateEmail)
	if len(emails) != 1 {
		t.Fatalf("%d emails to %s, want the verification email", len(emails), app.CandidateEmail)
	}
	if _, err := e.Writes.VerifyEmail(ctx, jobboard.HashVerificationToken(workertest.VerificationToken(t, emails[0])), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, found, err := e.DB.Suppression(ctx, app.CandidateEmail); err != nil || found {
		t.Fatalf("suppression after verification: found %v, %v; want lifted", found, err)
	}

	after := app.Event()
	after.OldStatus, after.NewStatus = jobboard.StatusReviewing, jobboard.StatusInterview
	e.SendBody(t, workertest.Body(t, after))
	e.Drain(t, e.Poller(h), 30*time.Second)
	wantClaim(t, e, after.EventID, "sent")
	if got := e.EmailsTo(t, app.CandidateEmail); len(got) != 2 {
		t.Errorf("%d emails to %s, want the verification and the status email", len(got), app.CandidateEmail)
	}
}

// A complaint is not lifted by the verification flow, and stops the
// verification link of an account that has not verified the address (who
// registers an address that complained cannot mail it). An account that
// verified the address before the complaint may ask for a new link, which
// is sent through the complaint: following it shows the address is still
// its own, which a withdrawal asks for, and leaves the complaint in place.
func TestVerificationDoesNotLiftAComplaint(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	h := e.Handler(t, e.Sender)

	u, ev := newAccount(t, e)
	suppress(t, e, jobboard.FeedbackComplained, u.Email)
	e.SendBody(t, workertest.Body(t, ev))
	e.Drain(t, e.Poller(h), 30*time.Second)
	wantClaim(t, e, ev.EventID, "suppressed")
	if got := e.EmailsTo(t, u.Email); len(got) != 0 {
		t.Errorf("%d verification emails to an address that complained, want none", len(got))
	}

	app := e.NewApp(t)
	suppress(t, e, jobboard.FeedbackComplained, app.CandidateEmail)
	if _, err := e.Writes.WithdrawComplaint(ctx, app.Candidate); !errors.Is(err, jobboard.ErrVerificationRequired) {
		t.Fatalf("withdrawal by an account verified before the complaint = %v, want ErrVerificationRequired", err)
	}
	_, evs, err := pgtest.Write(ctx, e.DB, func(st jobboard.Writes) (struct{}, error) {
		return struct{}{}, st.RequestVerification(ctx, app.Candidate.UserID, jobboard.DefaultVerificationPolicy, time.Now())
	})
	if err != nil || len(evs) != 1 {
		t.Fatalf("RequestVerification after a complaint: %+v, %v", evs, err)
	}
	e.SendBody(t, workertest.Body(t, evs[0]))
	e.Drain(t, e.Poller(h), 30*time.Second)
	wantClaim(t, e, evs[0].EventID, "sent")
	emails := e.EmailsTo(t, app.CandidateEmail)
	if len(emails) != 1 {
		t.Fatalf("%d emails to %s, want the verification email", len(emails), app.CandidateEmail)
	}
	if _, err := e.Writes.VerifyEmail(ctx, jobboard.HashVerificationToken(workertest.VerificationToken(t, emails[0])), time.Now()); err != nil {
		t.Fatal(err)
	}
	if s, found, err := e.DB.Suppression(ctx, app.CandidateEmail); err != nil || !found || s.Reason != jobboard.SuppressedByComplaint {
		t.Errorf("suppression = %+v, %v, %v; want the complaint kept", s, found, err)
	}
	if err := e.Writes.RequestVerification(ctx, app.Candidate.UserID, jobboard.DefaultVerificationPolicy, time.Now().Add(time.Hour)); !errors.Is(err, jobboard.ErrAlreadyVerified) {
		t.Errorf("RequestVerification once verified since the complaint = %v, want ErrAlreadyVerified", err)
	}
	if d, err := e.Writes.WithdrawComplaint(ctx, app.Candidate); err != nil || !d.Deliverable {
		t.Errorf("withdrawal once verified since the complaint = %+v, %v; want deliverable", d, err)
	}
}

// A complaint is lifted when the address's owner withdraws it: the
// status email suppressed before goes out for the next change, and
// another account's withdrawal cannot lift it.
func TestWithdrawnComplaintLetsTheNextStatusEmailOut(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	app, other := e.NewApp(t), e.NewApp(t)
	suppress(t, e, jobboard.FeedbackComplained, app.CandidateEmail)
	h := e.Handler(t, e.Sender)

	before := app.Event()
	e.SendBody(t, workertest.Body(t, before))
	e.Drain(t, e.Poller(h), 30*time.Second)
	wantClaim(t, e, before.EventID, "suppressed")

	// The other candidate has nothing to withdraw, and their call leaves
	// the complaint about this address as it is.
	if _, err := e.Writes.WithdrawComplaint(ctx, other.Candidate); !errors.Is(err, jobboard.ErrNotSuppressed) {
		t.Fatalf("another account's withdrawal = %v, want ErrNotSuppressed", err)
	}
	if s, found, err := e.DB.Suppression(ctx, app.CandidateEmail); err != nil || !found || s.Reason != jobboard.SuppressedByComplaint {
		t.Fatalf("suppression after another account's withdrawal = %+v, %v, %v; want the complaint", s, found, err)
	}

	// The owner verifies the address again (the verification flow is
	// TestVerificationDoesNotLiftAComplaint's), then withdraws.
	if _, err := e.Pool.Exec(ctx, `UPDATE users SET email_verified_at = now() WHERE id = $1`, app.Candidate.UserID); err != nil {
		t.Fatal(err)
	}
	d, err := e.Writes.WithdrawComplaint(ctx, app.Candidate)
	if err != nil || !d.Deliverable {
		t.Fatalf("WithdrawComplaint = %+v, %v; want deliverable", d, err)
	}
	after := app.Event()
	after.OldStatus, after.NewStatus = jobboard.StatusReviewing, jobboard.StatusInterview
	e.SendBody(t, workertest.Body(t, after))
	e.Drain(t, e.Poller(h), 30*time.Second)
	wantClaim(t, e, after.EventID, "sent")
	if got := e.EmailsTo(t, app.CandidateEmail); len(got) != 1 {
		t.Errorf("%d emails to %s, want the status email after the withdrawal", len(got), app.CandidateEmail)
	}
}
