package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// newAccount creates an unverified account with an address no other test
// uses, and queues its verification email as the API does; it returns the
// account and the event.
func newAccount(t *testing.T, e *workertest.Env) (jobboard.User, jobboard.Event) {
	t.Helper()
	ctx := context.Background()
	tag := strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	u, err := pgtest.CreateUser(ctx, e.Pool, jobboard.Registration{
		Email: "new-" + tag + "@example.com", Name: "Anyone", Role: jobboard.RoleCandidate}, "hash")
	if err != nil {
		t.Fatal(err)
	}
	ev := pgtest.MustWrite(t, e.DB, func(st jobboard.Writes) error {
		return st.RequestVerification(ctx, u.ID, jobboard.DefaultVerificationPolicy, time.Now())
	})[0]
	return u, ev
}

// storedTokenHashes returns the verification token hashes stored for the
// event.
func storedTokenHashes(t *testing.T, e *workertest.Env, eventID string) [][]byte {
	t.Helper()
	return tokenHashesIn(t, e, "email_verification_tokens", eventID)
}

// tokenHashesIn returns the token hashes stored in table for the event.
func tokenHashesIn(t *testing.T, e *workertest.Env, table, eventID string) [][]byte {
	t.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT token_hash FROM `+table+` WHERE event_id = $1`, eventID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The verification email: its link is VERIFY_EMAIL_URL (with its own
// query kept) plus token=<token>; the token is stored only as its hash,
// appears in no log line, and verifies the address once.
func TestVerificationEmailCarriesTheLink(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	u, ev := newAccount(t, e)
	e.SendBody(t, workertest.Body(t, ev))
	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)

	got := e.EmailsTo(t, u.Email)
	if len(got) != 1 {
		t.Fatalf("emails to %s = %d, want 1", u.Email, len(got))
	}
	if got[0].Header(mail.EventIDHeader) != ev.EventID {
		t.Errorf("%s = %q, want %s", mail.EventIDHeader, got[0].Header(mail.EventIDHeader), ev.EventID)
	}
	link := workertest.VerificationLink(t, got[0])
	base, _ := url.Parse(workertest.VerifyEmailURL)
	if link.Scheme != base.Scheme || link.Host != base.Host || link.Path != base.Path || link.Query().Get("lang") != "en" {
		t.Errorf("link %s does not keep the base %s", link, base)
	}
	token := link.Query().Get("token")
	if !jobboard.ValidVerificationToken(token) {
		t.Fatalf("link %s: token %q is not a token", link, token)
	}
	if !strings.Contains(got[0].Body.HTML, `href="`+strings.ReplaceAll(link.String(), "&", "&amp;")+`"`) {
		t.Errorf("the HTML body does not link to %s:\n%s", link, got[0].Body.HTML)
	}
	wantClaim(t, e, ev.EventID, "sent")

	// Stored as its SHA-256, never as itself.
	hashes := storedTokenHashes(t, e, ev.EventID)
	if len(hashes) != 1 || !bytes.Equal(hashes[0], jobboard.HashVerificationToken(token)) || bytes.Contains(hashes[0], []byte(token)) {
		t.Fatalf("stored token hashes %x, want only the SHA-256 of the link's token", hashes)
	}
	for _, l := range e.Logs.Lines(t) {
		if strings.Contains(fmt.Sprint(l), token) {
			t.Fatalf("a log line carries the token: %v", l)
		}
	}
	if l := e.Logs.Records(t); len(l) != 1 || l[0]["user_id"] != float64(u.ID) || l[0]["msg"] != "verification email sent" {
		t.Errorf("record lines %v, want one 'verification email sent' with user_id %d", l, u.ID)
	}

	verified, err := e.Writes.VerifyEmail(context.Background(), jobboard.HashVerificationToken(token), time.Now())
	if err != nil || !verified.EmailVerified || verified.ID != u.ID {
		t.Fatalf("VerifyEmail = %+v, %v; want user %d verified", verified, err, u.ID)
	}
}

// The same verification event twice (the outbox published it twice): one
// email, one token.
func TestVerificationEventTwiceSendsOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	u, ev := newAccount(t, e)
	body := workertest.Body(t, ev)
	first, second := e.SendBody(t, body), e.SendBody(t, body)
	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)

	if got := e.EmailsTo(t, u.Email); len(got) != 1 {
		t.Fatalf("emails to %s = %d, want 1", u.Email, len(got))
	}
	wantClaim(t, e, ev.EventID, "sent")
	if n := len(storedTokenHashes(t, e, ev.EventID)); n != 1 {
		t.Errorf("%d tokens stored, want 1", n)
	}
	got := outcomes(t, e.Logs)
	all := append(slices.Clone(got[first]), got[second]...)
	sort.Strings(all)
	if !slices.Equal(all, []string{"duplicate", "sent"}) {
		t.Errorf("outcomes = %v, want one sent and one duplicate", got)
	}
}

// A verification send that fails releases its claim, and with it the
// token it made: the retry makes a new token, and a link with the old one
// (which may have left, if the answer was lost) no longer works.
func TestRetriedVerificationEventReplacesTheToken(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{VisibilityTimeout: 1})
	u, ev := newAccount(t, e)
	e.SendBody(t, workertest.Body(t, ev))
	var (
		mu    sync.Mutex
		links []string
	)
	m := &workertest.FlakyMailer{Next: e.Sender, FailVerification: func(call int, v jobboard.VerificationEmail) error {
		mu.Lock()
		defer mu.Unlock()
		links = append(links, v.Link)
		if call == 1 {
			return fmt.Errorf("injected: connection reset after the request: %w", jobboard.ErrMailAmbiguous)
		}
		return nil
	}}
	e.Drain(t, e.Poller(e.Handler(t, m)), 30*time.Second)

	got := e.EmailsTo(t, u.Email)
	if len(got) != 1 || len(links) != 2 {
		t.Fatalf("emails %d, sends attempted %d; want 1 and 2", len(got), len(links))
	}
	first, err := url.Parse(links[0])
	if err != nil {
		t.Fatal(err)
	}
	oldToken, newToken := first.Query().Get("token"), workertest.VerificationToken(t, got[0])
	if oldToken == newToken || !jobboard.ValidVerificationToken(oldToken) {
		t.Fatalf("tokens %q then %q; want two different tokens", oldToken, newToken)
	}
	wantClaim(t, e, ev.EventID, "sent")
	if c := e.Claims(t, ev.EventID); c[0].Attempts != 1 {
		t.Errorf("claim attempts = %d, want 1 (the retry claimed anew after the release)", c[0].Attempts)
	}
	ctx := context.Background()
	if _, err := e.Writes.VerifyEmail(ctx, jobboard.HashVerificationToken(oldToken), time.Now()); !errors.Is(err, jobboard.ErrVerificationTokenInvalid) {
		t.Fatalf("the released attempt's token: %v, want ErrVerificationTokenInvalid", err)
	}
	if v, err := e.Writes.VerifyEmail(ctx, jobboard.HashVerificationToken(newToken), time.Now()); err != nil || !v.EmailVerified {
		t.Fatalf("the sent token: %+v, %v; want verified", v, err)
	}
}

// A status event whose candidate has not verified their address: the
// claim is finished as recipient_unverified, nothing is sent, the line is
// INFO and the metric counts it; a redelivery is a duplicate.
func TestUnverifiedCandidateGetsNoStatusEmail(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewUnverifiedApp(t)
	ev := app.Event()
	m := &workertest.FlakyMailer{Next: e.Sender}
	h := e.Handler(t, m)
	rec := record(workertest.Body(t, ev))
	for range 2 {
		resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
		}
	}
	wantEmails(t, e, app, ev, 0)
	if attempted, _ := m.Calls(); attempted != 0 {
		t.Errorf("sends attempted = %d, want 0", attempted)
	}
	wantClaim(t, e, ev.EventID, "recipient_unverified")
	lines := e.Logs.Records(t)
	if len(lines) != 2 || lines[0]["outcome"] != "recipient_unverified" || lines[0]["level"] != "INFO" ||
		lines[0]["application_id"] != float64(app.ID) || lines[1]["outcome"] != "duplicate" {
		t.Fatalf("record lines %v; want recipient_unverified (INFO), then duplicate", lines)
	}
	if ms := e.Logs.Metrics(t); len(ms) != 2 || ms[0]["UnverifiedRecipients"] != 1.0 || ms[1]["UnverifiedRecipients"] != 0.0 {
		t.Errorf("EMF lines %v; want UnverifiedRecipients 1, then 0", ms)
	}
}

// A verification event for an account verified meanwhile, or gone: no
// email, the claim finished as such.
func TestVerificationEventWithNothingToSend(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	verified, verifiedEv := newAccount(t, e)
	if _, err := e.Pool.Exec(ctx, `UPDATE users SET email_verified_at = now() WHERE id = $1`, verified.ID); err != nil {
		t.Fatal(err)
	}
	gone, goneEv := newAccount(t, e)
	if _, err := e.Pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, gone.ID); err != nil {
		t.Fatal(err)
	}
	m := &workertest.FlakyMailer{Next: e.Sender}
	a, b := record(workertest.Body(t, verifiedEv)), record(workertest.Body(t, goneEv))
	resp, err := e.Handler(t, m).Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{a, b}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
	}
	if attempted, _ := m.Calls(); attempted != 0 {
		t.Errorf("sends attempted = %d, want 0", attempted)
	}
	wantClaim(t, e, verifiedEv.EventID, "already_verified")
	wantClaim(t, e, goneEv.EventID, "user_missing")
	if n := len(storedTokenHashes(t, e, verifiedEv.EventID)) + len(storedTokenHashes(t, e, goneEv.EventID)); n != 0 {
		t.Errorf("%d tokens stored, want none", n)
	}
	got := outcomes(t, e.Logs)
	if !slices.Equal(got[a.MessageId], []string{"already_verified"}) || !slices.Equal(got[b.MessageId], []string{"user_missing"}) {
		t.Errorf("outcomes = %v", got)
	}
}

// The bases of the verification and password reset links must be
// absolute http(s) URLs without a token.
func TestNewRequiresTheLinksURLs(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	const verify, reset = "http://localhost:3000/verify-email", "http://localhost:3000/reset-password"
	for _, bad := range []string{"", "/verify", "ftp://app.example/v", "https://app.example/v?token=x", "https:///v"} {
		if _, err := worker.New(worker.Config{Store: e.DB, Mailer: e.Sender, VerifyEmailURL: bad, PasswordResetURL: reset}); err == nil {
			t.Errorf("VerifyEmailURL %q accepted", bad)
		}
		if _, err := worker.New(worker.Config{Store: e.DB, Mailer: e.Sender, VerifyEmailURL: verify, PasswordResetURL: bad}); err == nil {
			t.Errorf("PasswordResetURL %q accepted", bad)
		}
	}
	if _, err := worker.New(worker.Config{Store: e.DB, Mailer: e.Sender, VerifyEmailURL: verify, PasswordResetURL: reset}); err != nil {
		t.Errorf("local URLs refused: %v", err)
	}
}

// The same verification event twice in one batch: the records about one
// account run in order, so the second finds the first's finished claim
// (duplicate) rather than its live lease (busy, retried only after it).
func TestVerificationEventTwiceInOneBatch(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	u, ev := newAccount(t, e)
	a, b := record(workertest.Body(t, ev)), record(workertest.Body(t, ev))
	resp, err := e.Handler(t, e.Sender).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{a, b}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
	}
	if got := e.EmailsTo(t, u.Email); len(got) != 1 {
		t.Fatalf("emails to %s = %d, want 1", u.Email, len(got))
	}
	if got := outcomes(t, e.Logs); !slices.Equal(got[a.MessageId], []string{"sent"}) || !slices.Equal(got[b.MessageId], []string{"duplicate"}) {
		t.Errorf("outcomes = %v, want sent then duplicate", got)
	}
}
