package mail_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/jobboard/jobboard/internal/dev/faultproxy"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
)

const from = "jobboard <jobs@example.com>"

var recipientSeq atomic.Int64

// recipient returns an address no other test of this process sends to.
func recipient() string {
	return fmt.Sprintf("candidate-%d-%d@example.com", time.Now().UnixNano(), recipientSeq.Add(1))
}

func newSender(t *testing.T, client *sesv2.Client) *mail.Sender {
	t.Helper()
	s, err := mail.NewSender(client, from)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	return s
}

func TestSendStatusEmail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ses := localaws.SES(t)
	s := newSender(t, localaws.NewSESClient(ses.Endpoint))

	e := sampleEmail(jobboard.StatusInterview)
	e.To = recipient()
	id, err := s.SendStatusEmail(ctx, e)
	if err != nil {
		t.Fatalf("SendStatusEmail: %v", err)
	}
	if id == "" {
		t.Error("empty message id")
	}

	got, err := localaws.EmailsTo(ctx, ses.Endpoint, e.To)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("store has %d emails to %s, want 1", len(got), e.To)
	}
	subject, text, html, err := mail.Render(e)
	if err != nil {
		t.Fatal(err)
	}
	m := got[0]
	if m.MessageID != id {
		t.Errorf("stored messageId = %q, SendStatusEmail returned %q", m.MessageID, id)
	}
	if m.From != from {
		t.Errorf("from = %q, want %q", m.From, from)
	}
	if len(m.Destination.To) != 1 || m.Destination.To[0] != e.To || len(m.Destination.CC)+len(m.Destination.BCC) != 0 {
		t.Errorf("destination = %+v, want only %s", m.Destination, e.To)
	}
	if m.Subject != subject || m.Body.Text != text || m.Body.HTML != html {
		t.Errorf("stored email differs from Render:\nsubject %q\nwant    %q\ntext %q\nwant %q\nhtml %q\nwant %q", m.Subject, subject, m.Body.Text, text, m.Body.HTML, html)
	}
	if !strings.Contains(m.Subject, "Interview") || !strings.Contains(m.Body.HTML, "Babbage &amp; Co") {
		t.Errorf("stored email does not look like the interview email: %+v", m)
	}
}

func TestSendStatusEmailEscapesNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ses := localaws.SES(t)
	s := newSender(t, localaws.NewSESClient(ses.Endpoint))

	e := sampleEmail(jobboard.StatusOffer)
	e.To = recipient()
	e.CompanyName = "<script>alert(1)</script>\r\nBcc: victim@example.com"
	if _, err := s.SendStatusEmail(ctx, e); err != nil {
		t.Fatalf("SendStatusEmail: %v", err)
	}
	got, err := localaws.EmailsTo(ctx, ses.Endpoint, e.To)
	if err != nil || len(got) != 1 {
		t.Fatalf("EmailsTo = %d emails, %v; want 1", len(got), err)
	}
	m := got[0]
	if strings.ContainsAny(m.Subject, "\r\n") {
		t.Errorf("subject contains a line break: %q", m.Subject)
	}
	if !strings.Contains(m.Subject, "<script>alert(1)</script> Bcc: victim@example.com") {
		t.Errorf("subject %q does not show the cleaned name", m.Subject)
	}
	if strings.Contains(m.Body.HTML, "<script>") || !strings.Contains(m.Body.HTML, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("html does not escape the name:\n%s", m.Body.HTML)
	}
	if !strings.Contains(m.Body.Text, "<script>alert(1)</script>") {
		t.Errorf("text does not show the name as written:\n%s", m.Body.Text)
	}
	all, err := localaws.EmailsTo(ctx, ses.Endpoint, "victim@example.com")
	if err != nil || len(all) != 0 {
		t.Errorf("an email reached the injected Bcc address: %d, %v", len(all), err)
	}
}

func TestNewSenderValidatesFrom(t *testing.T) {
	t.Parallel()
	client := localaws.NewSESClient("http://127.0.0.1:1")
	for _, bad := range []string{"", "not an address", "jobs@example.com\r\nBcc: x@example.com", "a@b.c, d@e.f"} {
		if _, err := mail.NewSender(client, bad); err == nil {
			t.Errorf("NewSender(%q) accepted", bad)
		}
	}
	if _, err := mail.NewSender(nil, "jobs@example.com"); err == nil {
		t.Error("NewSender(nil client) accepted")
	}
	for _, good := range []string{"jobs@example.com", "Job Board <jobs@example.com>"} {
		if _, err := mail.NewSender(client, good); err != nil {
			t.Errorf("NewSender(%q): %v", good, err)
		}
	}
}

func TestBadRecipientIsRejectedWithoutCallingSES(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	s := newSender(t, localaws.NewSESClient(srv.URL))
	for _, to := range []string{"", "nobody", "Ada <ada@example.com>", "ada@example.com\r\nBcc: x@example.com"} {
		e := sampleEmail(jobboard.StatusOffer)
		e.To = to
		_, err := s.SendStatusEmail(context.Background(), e)
		if !errors.Is(err, jobboard.ErrMailRejected) {
			t.Errorf("To %q: error = %v, want ErrMailRejected", to, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("SES was called %d times for invalid recipients", n)
	}
}

// sesError answers every request with an AWS-shaped SES v2 (restJson1) error
// and counts the requests.
func sesError(t *testing.T, status int, code string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/v2/email/outbound-emails" {
			t.Errorf("request %s %s, want POST /v2/email/outbound-emails", r.Method, r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", code)
		w.Header().Set("X-Amzn-RequestId", "req-1")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"message":"injected %s"}`, code)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// noDelay is a retry backoff that does not wait, so that retries cost no
// test time.
type noDelay struct{}

func (noDelay) BackoffDelay(int, error) (time.Duration, error) { return 0, nil }

// Every SES v2 SendEmail error is classified as the API reference
// describes it, and sent exactly once, whatever retryer the client has.
func TestSendStatusEmailClassifiesSESErrors(t *testing.T) {
	t.Parallel()
	const (
		throttled = "throttled"
		paused    = "paused"
		rejected  = "rejected"
		refused   = "refused"
		retryable = "retryable"
	)
	tests := []struct {
		status int
		code   string
		kind   string
		typed  any // the modelled SDK error type, when there is one
	}{
		{429, "TooManyRequestsException", throttled, new(*types.TooManyRequestsException)},
		{400, "LimitExceededException", throttled, new(*types.LimitExceededException)},
		{400, "SendingPausedException", paused, new(*types.SendingPausedException)},
		{400, "AccountSuspendedException", paused, new(*types.AccountSuspendedException)},
		{400, "MailFromDomainNotVerifiedException", paused, new(*types.MailFromDomainNotVerifiedException)},
		{404, "NotFoundException", paused, new(*types.NotFoundException)},
		{400, "MessageRejected", rejected, new(*types.MessageRejected)},
		{400, "BadRequestException", rejected, new(*types.BadRequestException)},
		// Not authorised: IAM's refusal (in the sandbox, also for a
		// recipient the role's policy does not cover), refused
		// credentials, and any other 403.
		{403, "AccessDeniedException", refused, nil},
		{400, "AccessDeniedException", refused, nil},
		{403, "InvalidClientTokenId", refused, nil},
		{403, "ExpiredTokenException", refused, nil},
		{400, "NotAuthorized", refused, nil},
		{403, "SomethingForbidden", refused, nil},
		{500, "InternalFailure", retryable, nil},
		{503, "ServiceUnavailable", retryable, nil},
		{400, "SomethingNewException", retryable, nil},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			srv, calls := sesError(t, tt.status, tt.code)
			// A client that would retry three times: the Sender overrides it.
			client := localaws.NewSESClient(srv.URL, func(o *sesv2.Options) {
				o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
					so.MaxAttempts = 3
					so.Backoff = noDelay{}
				})
			})
			s := newSender(t, client)
			_, err := s.SendStatusEmail(context.Background(), sampleEmail(jobboard.StatusOffer))
			if err == nil {
				t.Fatal("SendStatusEmail succeeded against an error response")
			}
			for _, k := range []struct {
				kind   string
				target error
			}{{throttled, jobboard.ErrMailThrottled}, {paused, jobboard.ErrMailPaused}, {rejected, jobboard.ErrMailRejected}, {refused, jobboard.ErrMailRefused}} {
				if got, want := errors.Is(err, k.target), tt.kind == k.kind; got != want {
					t.Errorf("errors.Is(err, %v) = %v, want %v; err = %v", k.target, got, want, err)
				}
			}
			if errors.Is(err, jobboard.ErrMailAmbiguous) {
				t.Errorf("an answer from SES is classified as ambiguous: %v", err)
			}
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != tt.code {
				t.Errorf("the SDK error is not reachable, or has the wrong code: %v", err)
			}
			if tt.typed != nil && !errors.As(err, tt.typed) {
				t.Errorf("error %v is not a %T", err, tt.typed)
			}
			if !strings.Contains(err.Error(), sampleEmail(jobboard.StatusOffer).EventID) {
				t.Errorf("error %q does not name the event", err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("SES was called %d times, want 1 (no SDK retries)", n)
			}
		})
	}
}

// The SDK's retries are off: one SendStatusEmail is one request at the SES
// stand-in, even when the answer is a 503 or is lost. Counted at a fault
// proxy in front of the stand-in; a lost answer (the stand-in accepted the
// email, the connection was reset) is ErrMailAmbiguous, and the email is in
// the stand-in exactly once.
func TestSendStatusEmailIsSentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ses := localaws.SES(t)
	proxy, err := faultproxy.Start(ctx, ses.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	s := newSender(t, localaws.NewSESClient(proxy.URL))

	tests := []struct {
		fault         faultproxy.Fault
		wantForwarded int64 // requests that reached the stand-in
		wantEmails    int
		wantAmbiguous bool
	}{
		{faultproxy.Unavailable, 0, 0, false},
		{faultproxy.Refuse, 0, 0, true},
		{faultproxy.ResetAfter, 1, 1, true},
		{faultproxy.Pass, 1, 1, false},
	}
	for _, tt := range tests {
		e := sampleEmail(jobboard.StatusInterview)
		e.To = recipient()
		proxy.SetFault(tt.fault)
		before := proxy.Forwarded()
		attemptsBefore := proxy.Count(tt.fault)
		_, err := s.SendStatusEmail(ctx, e)
		if (err == nil) != (tt.fault == faultproxy.Pass) {
			t.Errorf("%v: error = %v", tt.fault, err)
		}
		if got := errors.Is(err, jobboard.ErrMailAmbiguous); got != tt.wantAmbiguous {
			t.Errorf("%v: ambiguous = %v, want %v (err %v)", tt.fault, got, tt.wantAmbiguous, err)
		}
		if n := proxy.Count(tt.fault) - attemptsBefore; n != 1 {
			t.Errorf("%v: requests = %d, want exactly 1", tt.fault, n)
		}
		if n := proxy.Forwarded() - before; n != tt.wantForwarded {
			t.Errorf("%v: forwarded = %d, want %d", tt.fault, n, tt.wantForwarded)
		}
		got, err := localaws.EmailsTo(ctx, ses.Endpoint, e.To)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.wantEmails {
			t.Errorf("%v: emails = %d, want %d", tt.fault, len(got), tt.wantEmails)
		}
	}
}

// A deadline that passes while SES has the request is ambiguous: the email
// may have been accepted.
func TestSendStatusEmailDeadlineIsAmbiguous(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	s := newSender(t, localaws.NewSESClient(srv.URL))

	// The deadline passes once the request is written, however slow the
	// machine: a fixed timeout could pass before, which is rightly not
	// ambiguous. The sender's own trace sees the write first (a trace
	// added to a context runs before the one it wraps).
	deadline := newDeadlineOnSignal()
	var once sync.Once
	ctx := httptrace.WithClientTrace(deadline, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(deadline.expire) },
	})
	_, err := s.SendStatusEmail(ctx, sampleEmail(jobboard.StatusOffer))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, jobboard.ErrMailAmbiguous) {
		t.Fatalf("error = %v, want context.DeadlineExceeded and ErrMailAmbiguous", err)
	}
	if errors.Is(err, jobboard.ErrMailThrottled) || errors.Is(err, jobboard.ErrMailRejected) || errors.Is(err, jobboard.ErrMailPaused) {
		t.Errorf("a deadline is classified as throttled, paused or rejected: %v", err)
	}

	// A context that ends before anything is sent is not ambiguous.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := s.SendStatusEmail(done, sampleEmail(jobboard.StatusOffer)); err == nil || errors.Is(err, jobboard.ErrMailAmbiguous) {
		t.Errorf("cancelled before sending: %v, want a plain error", err)
	}
}

// deadlineOnSignal is a context whose deadline passes when expire is
// called, not at a time.
type deadlineOnSignal struct {
	context.Context
	done chan struct{}
}

func newDeadlineOnSignal() *deadlineOnSignal {
	return &deadlineOnSignal{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineOnSignal) expire()               { close(c.done) }
func (c *deadlineOnSignal) Done() <-chan struct{} { return c.done }
func (c *deadlineOnSignal) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestSendStatusEmailTags(t *testing.T) {
	t.Parallel()
	// The SES stand-in does not keep tags: read them off the request.
	tags := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request: %v", err)
		}
		tags <- string(body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"MessageId":"m-1"}`)
	}))
	t.Cleanup(srv.Close)
	s := newSender(t, localaws.NewSESClient(srv.URL))
	s.ConfigurationSet = "status-emails"
	e := sampleEmail(jobboard.StatusHired)
	e.EventID = "odd id/with:chars"
	id, err := s.SendStatusEmail(context.Background(), e)
	if err != nil || id != "m-1" {
		t.Fatalf("SendStatusEmail = %q, %v", id, err)
	}
	req := <-tags
	for _, want := range []string{
		`{"Name":"event_id","Value":"odd_id_with_chars"}`,
		`"Headers":[{"Name":"X-Jobboard-Event-Id","Value":"odd_id_with_chars"}]`,
		`{"Name":"new_status","Value":"hired"}`,
		`"ConfigurationSetName":"status-emails"`,
		`"FromEmailAddress":"jobboard <jobs@example.com>"`,
	} {
		if !strings.Contains(req, want) {
			t.Errorf("request does not contain %s:\n%s", want, req)
		}
	}
}

// BenchmarkSendStatusEmail is one send to the local SES stand-in, render
// included: a floor for what a send costs the worker (real SES adds the
// network). Compare with BenchmarkRender.
func BenchmarkSendStatusEmail(b *testing.B) {
	ses := localaws.SES(b)
	s, err := mail.NewSender(localaws.NewSESClient(ses.Endpoint), from)
	if err != nil {
		b.Fatal(err)
	}
	e := sampleEmail(jobboard.StatusInterview)
	e.To = recipient()
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.SendStatusEmail(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := localaws.ClearEmails(ctx, ses.Endpoint); err != nil {
		b.Fatal(err)
	}
}

// The password reset email reaches SES as rendered, to the bare address,
// tagged with its event; a link that cannot be rendered is rejected for
// good, before SES is asked.
func TestSendPasswordResetEmail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ses := localaws.SES(t)
	s := newSender(t, localaws.NewSESClient(ses.Endpoint))
	e := jobboard.PasswordResetEmail{EventID: "5d2a0000-0000-4000-8000-000000000001", To: recipient(),
		Link: "https://app.example/reset-password?token=abc"}
	id, err := s.SendPasswordResetEmail(ctx, e)
	if err != nil || id == "" {
		t.Fatalf("SendPasswordResetEmail = %q, %v", id, err)
	}
	got, err := localaws.EmailsTo(ctx, ses.Endpoint, e.To)
	if err != nil || len(got) != 1 {
		t.Fatalf("emails to %s: %d, %v; want 1", e.To, len(got), err)
	}
	subject, text, html, err := mail.RenderPasswordReset(e)
	if err != nil {
		t.Fatal(err)
	}
	if m := got[0]; m.MessageID != id || m.Subject != subject || m.Body.Text != text || m.Body.HTML != html ||
		m.Header(mail.EventIDHeader) != e.EventID {
		t.Errorf("stored email %+v differs from the rendered one", m)
	}
	e.Link, e.To = "javascript:alert(1)", recipient()
	if _, err := s.SendPasswordResetEmail(ctx, e); !errors.Is(err, jobboard.ErrMailRejected) {
		t.Errorf("a bad link: %v, want ErrMailRejected", err)
	}
	if got, _ := localaws.EmailsTo(ctx, ses.Endpoint, e.To); len(got) != 0 {
		t.Errorf("a bad link reached SES: %d emails", len(got))
	}
}
