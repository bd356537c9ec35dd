// Package worker is the status-email worker: the handler that the SQS event
// source mapping invokes with a batch of events. Each record is handled in
// three steps, none of which holds a transaction across the email:
//
//  1. claim the event id with a lease, and load the application (one short
//     statement);
//  2. send the email, with no transaction open and no connection held;
//  3. record the outcome, guarded by the lease token (one short statement),
//     or release the claim if the email did not leave, so a retry can send.
//
// Records of a batch run concurrently, those of one application in order.
// Only the records that failed are reported back, each with a backoff that
// suits its failure, so SQS redelivers them and deletes the rest.
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
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
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
	// DefaultTimeout is the deadline of an invocation whose context has
	// none (tests, tools): the worker's Timeout in template.yaml.
	DefaultTimeout = 30 * time.Second
)

// returnMargin is kept free at the end of an invocation for the database to
// give up and for the response to be returned.
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
	verifyURL *url.URL
	resetURL  *url.URL
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
	return &Handler{c: c, verifyURL: verifyURL, resetURL: resetURL}, nil
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
// of one application run in order, one after the other, and a failed one
// holds back the rest of its application's records, so that emails about
// one application are not sent out of order. The same event twice in one
// batch is claimed by the first record and skipped by the second.
//
// It returns an error, failing the whole batch, only when not one record
// reached the database because the database failed (it is unreachable, for
// instance): that is an outage, not a bad record.
func (h *Handler) Handle(ctx context.Context, batch events.SQSEvent) (events.SQSEventResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	recs := make([]record, len(batch.Records))
	for i, m := range batch.Records {
		recs[i] = record{msg: m}
		recs[i].ev, recs[i].decodeErr = jobboard.DecodeEvent([]byte(m.Body))
	}

	b := &run{h: h, marker: newMarker(h.c.Store)}
	var wg sync.WaitGroup
	groups := make(chan []int)
	for range min(h.c.Concurrency, len(recs)) {
		wg.Go(func() {
			for g := range groups {
				b.handleGroup(ctx, recs, g)
			}
		})
	}
	for _, g := range groupByApplication(recs) {
		groups <- g
	}
	close(groups)
	wg.Wait()
	b.marker.close()

	var (
		answered   int
		storeError error
	)
	for _, r := range recs {
		if r.res.answered {
			answered++
		}
		if r.res.storeErr != nil && storeError == nil {
			storeError = r.res.storeErr
		}
	}
	writeMetrics(h.c.Metrics, h.c.FunctionVersion, h.c.Now(), recs)
	if answered == 0 && storeError != nil {
		return events.SQSEventResponse{}, fmt.Errorf("no record of the batch could be processed: %w", storeError)
	}

	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var later []jobboard.Redelivery
	for _, r := range recs {
		if !r.res.failed {
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.msg.MessageId})
		later = append(later, jobboard.Redelivery{
			MessageID: r.msg.MessageId, ReceiptHandle: r.msg.ReceiptHandle,
			After: backoff(r.res.retry, receiveCount(r.msg), r.res.busyFor, h.c.Jitter),
		})
	}
	h.redeliver(ctx, later)
	return resp, nil
}

// record is one message of the batch, decoded, and what became of it.
type record struct {
	msg       events.SQSMessage
	ev        jobboard.Event
	decodeErr error
	res       result
}

// result is what became of one record.
type result struct {
	outcome  string     // as logged
	failed   bool       // report it in batchItemFailures
	retry    retryClass // the backoff of a failed record
	busyFor  time.Duration
	answered bool   // the database answered (even if the record failed)
	storeErr error  // the database itself failed
	stop     string // do not start the rest of the batch, and why
}

// run is the state of one Handle call that its goroutines share.
type run struct {
	h      *Handler
	marker *marker

	mu        sync.Mutex
	stop      string     // why no new record starts, once set
	stopRetry retryClass // the backoff of the records not started for it
}

// handleGroup handles the records of one application (or account) in order. After a
// failure the rest of the group is not started.
func (b *run) handleGroup(ctx context.Context, recs []record, group []int) {
	var heldBack *result
	for _, i := range group {
		r := &recs[i]
		switch reason, retry := b.stopped(ctx); {
		case reason != "":
			r.res = b.h.notStarted(ctx, r, reason, retry)
		case heldBack != nil:
			r.res = b.h.notStarted(ctx, r, "an earlier event of the same application or account failed", heldBack.retry)
		default:
			r.res = b.h.process(ctx, b.marker, r.msg, r.ev, r.decodeErr)
			if r.res.stop != "" {
				b.stopAll(r.res.stop, r.res.retry)
			}
		}
		if r.res.failed && heldBack == nil {
			heldBack = &r.res
		}
	}
}

// stopped says why no new record should start, or "".
func (b *run) stopped(ctx context.Context) (string, retryClass) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != "" {
		return b.stop, b.stopRetry
	}
	if ctx.Err() != nil {
		return "invocation cancelled", retrySoon
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(b.h.c.Now()) < b.h.c.StartMargin {
		return "the Lambda deadline is near", retrySoon
	}
	return "", retrySoon
}

func (b *run) stopAll(reason string, retry retryClass) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop == "" {
		b.stop, b.stopRetry = reason, retry
	}
}

func (h *Handler) notStarted(ctx context.Context, r *record, reason string, retry retryClass) result {
	h.logRecord(ctx, slog.LevelWarn, "record not started: "+reason, r.msg.MessageId, r.ev, outcomeNotStarted, "")
	return result{outcome: outcomeNotStarted, failed: true, retry: retry}
}

// groupByApplication returns the indexes of the records, grouped so that
// the records about one application form one group, in batch order, and
// so do the records about one account (verification and password reset
// events): the same event twice in a batch is then claimed by the first
// record and skipped by the second, instead of finding the first's live
// lease. A record that is about neither (a reset for an address no account
// has) is a group of its own.
func groupByApplication(recs []record) [][]int {
	type subject struct {
		verification bool
		id           int64
	}
	var groups [][]int
	bySubject := map[subject]int{}
	for i, r := range recs {
		key := subject{id: r.ev.ApplicationID}
		if r.ev.Type == jobboard.EventTypeEmailVerificationRequested || r.ev.Type == jobboard.EventTypePasswordResetRequested {
			key = subject{verification: true, id: r.ev.UserID}
		}
		if r.decodeErr != nil || key.id == 0 {
			groups = append(groups, []int{i})
			continue
		}
		if g, ok := bySubject[key]; ok {
			groups[g] = append(groups[g], i)
			continue
		}
		bySubject[key] = len(groups)
		groups = append(groups, []int{i})
	}
	return groups
}

// redeliver asks the queue for the backoffs, in the time left. A failure
// costs only time: those records come back after the visibility timeout.
func (h *Handler) redeliver(ctx context.Context, rs []jobboard.Redelivery) {
	if h.c.Redelivery == nil || len(rs) == 0 {
		return
	}
	ctx, cancel := withEarlierDeadline(context.WithoutCancel(ctx), ctx, returnMargin)
	defer cancel()
	if err := h.c.Redelivery.Redeliver(ctx, rs); err != nil {
		h.c.Logger.LogAttrs(ctx, slog.LevelWarn, "could not schedule the retries; they wait for the visibility timeout",
			slog.Int("records", len(rs)), slog.String("error", err.Error()))
	}
}

// withEarlierDeadline returns ctx bounded by the deadline of from, less
// margin.
func withEarlierDeadline(ctx, from context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	deadline, ok := from.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-margin))
}
