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
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// squatterName is the name a test account registers with: the reset email
// must not carry it (nor anything else a user wrote).
const squatterName = "PayPal Security: log in at https://evil.example"

// resetRequest creates an account with an address no other test uses (or
// none, withAccount false) and asks for a reset of its password as the API
// does; it returns the address, the account (zero without one) and the
// event.
func resetRequest(t *testing.T, e *workertest.Env, withAccount bool) (string, jobboard.User, jobboard.Event) {
	t.Helper()
	ctx := context.Background()
	email := "reset-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16] + "@example.com"
	var u jobboard.User
	if withAccount {
		var err error
		if u, err = pgtest.CreateUser(ctx, e.Pool, jobboard.Registration{Email: email, Name: squatterName, Role: jobboard.RoleCandidate}, "hash"); err != nil {
			t.Fatal(err)
		}
	}
	evs := pgtest.MustWrite(t, e.DB, func(st jobboard.Writes) error {
		_, err := st.RequestPasswordReset(ctx, email, jobboard.DefaultPasswordResetPolicy, time.Now())
		return err
	})
	if len(evs) != 1 {
		t.Fatalf("RequestPasswordReset committed %+v; want one event", evs)
	}
	return email, u, evs[0]
}

// storedResetHashes returns the reset token hashes stored for the event.
func storedResetHashes(t *testing.T, e *workertest.Env, eventID string) [][]byte {
	t.Helper()
	return tokenHashesIn(t, e, "password_reset_tokens", eventID)
}

// The reset email, through the queue, the worker and the SES stand-in: its
// link is ACCOUNT_RECOVERY_URL (with its own query kept) plus token=<token>;
// it carries nothing that a user wrote (not the account's name); the token
// is stored only as its hash, appears in no log line and no outbox row,
// and sets a new password once.
func TestPasswordResetEmailCarriesTheLink(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	email, u, ev := resetRequest(t, e, true)
	e.SendBody(t, workertest.Body(t, ev))
	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)

	got := e.EmailsTo(t, email)
	if len(got) != 1 {
		t.Fatalf("emails to %s = %d, want 1", email, len(got))
	}
	if got[0].Header(mail.EventIDHeader) != ev.EventID {
		t.Errorf("%s = %q, want %s", mail.EventIDHeader, got[0].Header(mail.EventIDHeader), ev.EventID)
	}
	link := workertest.PasswordResetLink(t, got[0])
	base, _ := url.Parse(workertest.PasswordResetURL)
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
	for _, part := range []string{got[0].Subject, got[0].Body.Text, got[0].Body.HTML} {
		if strings.Contains(part, "PayPal") || strings.Contains(part, "evil.example") {
			t.Fatalf("the reset email carries the account's name:\n%s", part)
		}
	}
	if !strings.Contains(got[0].Body.Text, "60 minutes") {
		t.Errorf("the text does not say how long the link works:\n%s", got[0].Body.Text)
	}
	wantClaim(t, e, ev.EventID, "sent")

	hashes := storedResetHashes(t, e, ev.EventID)
	if len(hashes) != 1 || !bytes.Equal(hashes[0], jobboard.HashVerificationToken(token)) {
		t.Fatalf("stored token hashes %x, want only the SHA-256 of the link's token", hashes)
	}
	for _, l := range e.Logs.Lines(t) {
		if strings.Contains(fmt.Sprint(l), token) {
			t.Fatalf("a log line carries the token: %v", l)
		}
	}
	var inOutbox int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE payload::text LIKE '%' || $1 || '%'`, token).Scan(&inOutbox); err != nil || inOutbox != 0 {
		t.Fatalf("outbox rows carrying the token: %d, %v", inOutbox, err)
	}
	if l := e.Logs.Records(t); len(l) != 1 || l[0]["user_id"] != float64(u.ID) || l[0]["msg"] != "password reset email sent" {
		t.Errorf("record lines %v, want one 'password reset email sent' with user_id %d", l, u.ID)
	}

	ctx := context.Background()
	reset, err := e.Writes.ResetPassword(ctx, jobboard.HashVerificationToken(token), "new hash", time.Now())
	if err != nil || reset.ID != u.ID || !reset.EmailVerified {
		t.Fatalf("ResetPassword = %+v, %v; want user %d, verified", reset, err, u.ID)
	}
	if _, err := e.Writes.ResetPassword(ctx, jobboard.HashVerificationToken(token), "again", time.Now()); !errors.Is(err, jobboard.ErrPasswordResetTokenUsed) {
		t.Fatalf("the token a second time: %v, want ErrPasswordResetTokenUsed", err)
	}
}

// A reset asked for an address no account has: the event (queued so that
// the API's answer does not tell) is claimed and finished as no_account,
// at INFO, with no email and no token; a redelivery is a duplicate. An
// account gone between the request and the claim is the same.
func TestPasswordResetForNoAccount(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	nobody, _, noneEv := resetRequest(t, e, false)
	if noneEv.UserID != 0 {
		t.Fatalf("event for an address without an account carries user %d", noneEv.UserID)
	}
	goneEmail, gone, goneEv := resetRequest(t, e, true)
	if _, err := e.Pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, gone.ID); err != nil {
		t.Fatal(err)
	}
	m := &workertest.FlakyMailer{Next: e.Sender}
	h := e.Handler(t, m)
	a, b := record(workertest.Body(t, noneEv)), record(workertest.Body(t, goneEv))
	for range 2 {
		resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{a, b}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
		}
	}
	if attempted, _ := m.Calls(); attempted != 0 {
		t.Errorf("sends attempted = %d, want 0", attempted)
	}
	if n := len(e.EmailsTo(t, nobody)) + len(e.EmailsTo(t, goneEmail)); n != 0 {
		t.Errorf("%d emails sent, want none", n)
	}
	wantClaim(t, e, noneEv.EventID, "no_account")
	wantClaim(t, e, goneEv.EventID, "no_account")
	if n := len(storedResetHashes(t, e, noneEv.EventID)) + len(storedResetHashes(t, e, goneEv.EventID)); n != 0 {
		t.Errorf("%d tokens stored, want none", n)
	}
	got := outcomes(t, e.Logs)
	if !slices.Equal(got[a.MessageId], []string{"no_account", "duplicate"}) || !slices.Equal(got[b.MessageId], []string{"no_account", "duplicate"}) {
		t.Errorf("outcomes = %v; want no_account, then duplicate, for each", got)
	}
	for _, l := range e.Logs.Records(t) {
		if l["outcome"] == "no_account" && l["level"] != "INFO" {
			t.Errorf("no_account logged at %v, want INFO: it is the rule working", l["level"])
		}
	}
}

// The same reset event twice (the outbox published it twice): one email,
// one token, whether the copies come in two batches or in one.
func TestPasswordResetEventTwiceSendsOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	email, _, ev := resetRequest(t, e, true)
	body := workertest.Body(t, ev)
	first, second := e.SendBody(t, body), e.SendBody(t, body)
	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)
	if got := e.EmailsTo(t, email); len(got) != 1 {
		t.Fatalf("emails to %s = %d, want 1", email, len(got))
	}
	wantClaim(t, e, ev.EventID, "sent")
	if n := len(storedResetHashes(t, e, ev.EventID)); n != 1 {
		t.Errorf("%d tokens stored, want 1", n)
	}
	got := outcomes(t, e.Logs)
	all := append(slices.Clone(got[first]), got[second]...)
	sort.Strings(all)
	if !slices.Equal(all, []string{"duplicate", "sent"}) {
		t.Errorf("outcomes = %v, want one sent and one duplicate", got)
	}

	// In one batch: the records about one account run in order, so the
	// second finds the first's finished claim, not its live lease.
	email, _, ev = resetRequest(t, e, true)
	a, b := record(workertest.Body(t, ev)), record(workertest.Body(t, ev))
	resp, err := e.Handler(t, e.Sender).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{a, b}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
	}
	if got := e.EmailsTo(t, email); len(got) != 1 {
		t.Fatalf("emails to %s = %d, want 1", email, len(got))
	}
	if got := outcomes(t, e.Logs); !slices.Equal(got[a.MessageId], []string{"sent"}) || !slices.Equal(got[b.MessageId], []string{"duplicate"}) {
		t.Errorf("outcomes = %v, want sent then duplicate", got)
	}
}

// A reset send that fails releases its claim, and with it its token: the
// retry makes a new token, and a link with the old one (which may have
// left, if the answer was lost) no longer works.
func TestRetriedPasswordResetReplacesTheToken(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{VisibilityTimeout: 1})
	email, _, ev := resetRequest(t, e, true)
	e.SendBody(t, workertest.Body(t, ev))
	var (
		mu    sync.Mutex
		links []string
	)
	m := &workertest.FlakyMailer{Next: e.Sender, FailPasswordReset: func(call int, r jobboard.PasswordResetEmail) error {
		mu.Lock()
		defer mu.Unlock()
		links = append(links, r.Link)
		if call == 1 {
			return fmt.Errorf("injected: connection reset after the request: %w", jobboard.ErrMailAmbiguous)
		}
		return nil
	}}
	e.Drain(t, e.Poller(e.Handler(t, m)), 30*time.Second)

	got := e.EmailsTo(t, email)
	if len(got) != 1 || len(links) != 2 {
		t.Fatalf("emails %d, sends attempted %d; want 1 and 2", len(got), len(links))
	}
	first, err := url.Parse(links[0])
	if err != nil {
		t.Fatal(err)
	}
	oldToken, newToken := first.Query().Get("token"), workertest.PasswordResetToken(t, got[0])
	if oldToken == newToken || !jobboard.ValidVerificationToken(oldToken) {
		t.Fatalf("tokens %q then %q; want two different tokens", oldToken, newToken)
	}
	ctx := context.Background()
	if err := e.DB.CheckPasswordResetToken(ctx, jobboard.HashVerificationToken(oldToken), time.Now()); !errors.Is(err, jobboard.ErrPasswordResetTokenInvalid) {
		t.Fatalf("the released attempt's token: %v, want ErrPasswordResetTokenInvalid", err)
	}
	if _, err := e.Writes.ResetPassword(ctx, jobboard.HashVerificationToken(newToken), "new hash", time.Now()); err != nil {
		t.Fatalf("the sent token: %v", err)
	}
}
