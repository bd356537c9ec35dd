// Package worker is the status-email worker: the handler that the SQS event
// source mapping invokes with a batch of events. Each record is handled in
// three steps, none of which holds a transaction across the email:
//
//  1. claim the event id with a lease, and load the application (one short
//     statement);
//  2. send the email at a send slot of the shared schedule (pacing.go),
//     with no transaction open and no connection held;
//  3. record the outcome, guarded by the lease token (one short statement),
//     or release the claim if the email did not leave, so a retry can send.
//
// Records of a batch run concurrently, those of one application in order
// (package sqsbatch runs them). Only the records that failed are reported
// back, each with a backoff that suits its failure, so SQS redelivers them
// and deletes the rest.
//
// docs/design.md has the outcome table; the tests of this package act it
// out against PostgreSQL and the local stand-ins for SQS and SES.
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/sqsbatch"
)

// Defaults of Config.
const (
	// DefaultConcurrency is the batch size of the event source mapping: a
	// whole batch at once.
	DefaultConcurrency = 10
	// DefaultStartMargin: a record is not started with less time than this
	// left before the Lambda deadline. It covers a claim, a send and a mark.
	DefaultStartMargin = 5 * time.Second
	// DefaultSendMargin: the email send gives up this long before the
	// deadline, leaving time to record or release the claim.
	DefaultSendMargin = 2 * time.Second
	// DefaultLeaseMargin is how long a lease outlives the invocation that
	// took it: the clock difference between this function and the database
	// it may cover. Only then can another worker take the event over.
	DefaultLeaseMargin = 10 * time.Second
)

// returnMargin is kept free at the end of an invocation for the database to
// give up and for the redeliveries and the response to be made.
const returnMargin = 250 * time.Millisecond

// Config is what a Handler needs. Store and Mailer are required.
type Config struct {
	// Store claims events and loads applications (postgres.DB).
	Store jobboard.EventStore
	// Mailer sends the status, verification and password reset emails
	// (mail.Sender).
	Mailer jobboard.Mailer
	// VerifyEmailURL is the base of the verification link (the
	// VERIFY_EMAIL_URL setting): the page of the front end that posts the
	// token to POST /v1/auth/verify-email. The link is this URL with
	// token=<token> added to its query. Required: an absolute http(s) URL.
	VerifyEmailURL string
	// PasswordResetURL is the base of the password reset link (the
	// ACCOUNT_RECOVERY_URL setting, named so because a setting whose name
	// says PASSWORD reads as a secret): the page of the front end that
	// asks for the new password and posts it with the token to
	// POST /v1/auth/password-reset/confirm. Required, as VerifyEmailURL.
	PasswordResetURL string
	// Suppressions, if set, is read before each send (postgres.DB): an
	// address that hard-bounced or complained gets no email (outcome
	// suppressed).
	Suppressions jobboard.SuppressionList
	// Redelivery, if set, gives failed records their backoff
	// (queue.Redeliverer); otherwise they wait for the visibility timeout.
	Redelivery jobboard.Redeliverer
	// Schedule and Rate, if both set, pace the sends (pacing.go): every
	// send takes a slot of Schedule (postgres.DB), shared by every worker
	// instance, at the mail service's Rate (mail.SendRate).
	Schedule jobboard.SendSchedule
	Rate     jobboard.SendRate
	// Requeuer, if set, puts a record back on its queue as a new message
	// (queue.Redeliverer) when its send slot is beyond SlotHorizon or the
	// mail service throttled it anyway; otherwise it fails with a backoff.
	Requeuer jobboard.Requeuer
	// SlotHorizon: a record whose send slot is at most this far away waits
	// for it; zero means DefaultSlotHorizon.
	SlotHorizon time.Duration
	// Concurrency bounds the records handled at once; zero means
	// DefaultConcurrency.
	Concurrency int
	// Retention is how long claims are kept (see jobboard.Expired); zero
	// means jobboard.DefaultRetention.
	Retention time.Duration
	// Logger receives one JSON line per record. Default: discard.
	Logger *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per batch;
	// in Lambda it is stdout, like the logs. Default: discard.
	Metrics io.Writer
	// FunctionVersion is the Lambda function version that runs the handler
	// (function.Settings.Version): the metric line carries it as a
	// dimension, so that a deploy's rollback alarms watch the new version
	// alone. Empty outside Lambda.
	FunctionVersion string
	// StartMargin, SendMargin and LeaseMargin bound the work against the
	// Lambda deadline; zero means their defaults.
	StartMargin time.Duration
	SendMargin  time.Duration
	LeaseMargin time.Duration
	// Now is the clock the deadline and event ages are compared with.
	// Default: time.Now.
	Now func() time.Time
	// Jitter returns a number in [0, 1) that spreads backoffs apart.
	// Default: math/rand/v2's Float64.
	Jitter func() float64
}

// Handler handles batches of events. It is safe for concurrent use.
type Handler struct {
	c         Config
	batch     sqsbatch.Config
	verifyURL *url.URL
	resetURL  *url.URL
	// rateWarned is when the unknown send rate was last logged (Unix ns).
	rateWarned atomic.Int64
}

// New returns a Handler. It returns an error when a required dependency is
// missing or a setting is out of range.
func New(c Config) (*Handler, error) {
	if c.Store == nil || c.Mailer == nil {
		return nil, errors.New("worker: Store and Mailer are required")
	}
	verifyURL, err := ParseVerifyEmailURL(c.VerifyEmailURL)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	resetURL, err := ParsePasswordResetURL(c.PasswordResetURL)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	defaults := []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.StartMargin, DefaultStartMargin},
		{&c.SendMargin, DefaultSendMargin},
		{&c.LeaseMargin, DefaultLeaseMargin},
		{&c.Retention, jobboard.DefaultRetention},
		{&c.SlotHorizon, DefaultSlotHorizon},
	}
	for _, d := range defaults {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	switch {
	case c.Concurrency < 0:
		return nil, fmt.Errorf("worker: concurrency %d must be positive", c.Concurrency)
	case c.SendMargin >= c.StartMargin:
		return nil, fmt.Errorf("worker: send margin %v must be shorter than start margin %v", c.SendMargin, c.StartMargin)
	}
	if err := jobboard.CheckRetention(c.Retention); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = io.Discard
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Jitter == nil {
		c.Jitter = defaultJitter
	}
	batch := sqsbatch.Config{StartMargin: c.StartMargin, Concurrency: c.Concurrency, Redelivery: c.Redelivery, Requeuer: c.Requeuer, Logger: c.Logger, Now: c.Now}
	return &Handler{c: c, batch: batch, verifyURL: verifyURL, resetURL: resetURL}, nil
}

// ParseVerifyEmailURL reads the base of the verification link. Errors: not
// an absolute http or https URL, or one that carries a token already.
func ParseVerifyEmailURL(s string) (*url.URL, error) {
	return parseLinkURL("verification", "VERIFY_EMAIL_URL", s)
}

// ParsePasswordResetURL reads the base of the password reset link, as
// ParseVerifyEmailURL reads the verification link's.
func ParsePasswordResetURL(s string) (*url.URL, error) {
	return parseLinkURL("password reset", "ACCOUNT_RECOVERY_URL", s)
}

// parseLinkURL reads the base of the link of an email: an absolute http or
// https URL without a token parameter.
func parseLinkURL(link, setting, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return nil, fmt.Errorf("the %s link's URL (%s) is required", link, setting)
	case err != nil:
		return nil, fmt.Errorf("%s link's URL %q: %w", link, s, err)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("%s link's URL %q: want an absolute http or https URL", link, s)
	case u.Query().Has("token"):
		return nil, fmt.Errorf("%s link's URL %q has a token parameter already", link, s)
	}
	return u, nil
}

// Handle processes a batch and reports the records that failed, which SQS
// will deliver again (after the backoff it gives them, if Redelivery is
// set). Records run concurrently, up to Concurrency at once; the records
// of one application (or account) run in order, one after the other, and a
// failed one holds back the rest of its application's records, so that
// emails about one application are not sent out of order. The same event
// twice in one batch is claimed by the first record and skipped by the
// second.
//
// It returns an error, failing the whole batch, only when not one record
// reached the database because the database failed (it is unreachable, for
// instance): that is an outage, not a bad record.
func (h *Handler) Handle(ctx context.Context, batch events.SQSEvent) (events.SQSEventResponse, error) {
	recs := make([]sqsbatch.Record[*record], len(batch.Records))
	for i, m := range batch.Records {
		r := &record{}
		r.ev, r.decodeErr = jobboard.DecodeEvent([]byte(m.Body))
		recs[i] = sqsbatch.Record[*record]{Message: m, Key: r.key(), Value: r}
	}
	b := &run{h: h, marker: newMarker(h.c.Store)}
	resp, err := sqsbatch.Consume(ctx, h.batch, recs, sqsbatch.Handler[*record]{Process: b.handleRecord, NotStarted: b.notStarted})
	b.marker.close()
	writeMetrics(h.c.Metrics, h.c.FunctionVersion, h.c.Now(), recs)
	return resp, err
}

// record is one message of the batch, decoded, and what became of it.
type record struct {
	ev        jobboard.Event
	decodeErr error
	res       result
}

// key is the record's ordering key: the application it is about or, for a
// verification or password reset event, the account; none for a malformed
// record or a reset for an address no account has. The same event twice in
// a batch is then claimed by the first record and skipped by the second,
// instead of finding the first's live lease.
func (r *record) key() string {
	switch {
	case r.decodeErr != nil:
		return ""
	case r.ev.Type == jobboard.EventTypeEmailVerificationRequested || r.ev.Type == jobboard.EventTypePasswordResetRequested:
		if r.ev.UserID != 0 {
			return "account " + strconv.FormatInt(r.ev.UserID, 10)
		}
	case r.ev.ApplicationID != 0:
		return "application " + strconv.FormatInt(r.ev.ApplicationID, 10)
	}
	return ""
}

// result is what became of one record.
type result struct {
	outcome  string     // as logged
	failed   bool       // report it in batchItemFailures
	retry    retryClass // the backoff of a failed record
	busyFor  time.Duration
	requeue  bool   // put off: sent again as a new message after busyFor
	answered bool   // the database answered (even if the record failed)
	storeErr error  // the database itself failed
	stop     string // do not start the rest of the batch, and why
}

// run is the state of one Handle call that its records share.
type run struct {
	h      *Handler
	marker *marker
}

// handleRecord processes a record for the consumer.
func (b *run) handleRecord(ctx context.Context, r sqsbatch.Record[*record]) sqsbatch.Result {
	res := b.h.process(ctx, b.marker, r.Message, r.Value.ev, r.Value.decodeErr)
	r.Value.res = res
	out := sqsbatch.Result{Failed: res.failed, Answered: res.answered, StoreErr: res.storeErr, Stop: res.stop}
	switch {
	case res.requeue:
		out.Requeue, out.RetryIn = true, res.busyFor
	case res.failed:
		out.RetryIn = backoff(res.retry, r.Receives(), res.busyFor, b.h.c.Jitter)
	}
	return out
}

// notStarted logs a record that is not started and gives it the backoff of
// its cause, the failure that held it back or stopped the batch.
func (b *run) notStarted(ctx context.Context, r sqsbatch.Record[*record], why string, cause *sqsbatch.Record[*record]) time.Duration {
	retry := retrySoon
	if cause != nil {
		retry = cause.Value.res.retry
	}
	b.h.logRecord(ctx, slog.LevelWarn, "record not started: "+why, r.Message.MessageId, r.Value.ev, outcomeNotStarted, "")
	r.Value.res = result{outcome: outcomeNotStarted, failed: true, retry: retry}
	return backoff(retry, r.Receives(), 0, b.h.c.Jitter)
}
