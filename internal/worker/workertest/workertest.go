// Package workertest assembles the real peers that the tests of the event
// pipeline (packages worker, outbox and sweeper) run against: a fresh
// PostgreSQL database holding an application, a queue and its dead-letter
// queue on the local SQS stand-in, a mail.Sender on the local SES stand-in,
// and the worker's handler wired to them. The only fakes are FlakyMailer and
// FaultyPublisher, which wrap the real sender and publisher to inject
// failures.
//
// It is for tests only, like pgtest.
package workertest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/syncio"
	"github.com/jobboard/jobboard/internal/function/eventsource"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/worker"
)

// MailFrom is the sender address of the test emails.
const MailFrom = "jobboard <jobs@example.com>"

// VerifyEmailURL and PasswordResetURL are the links' bases in the tests
// (with a query of their own, which the links keep beside the token).
const (
	VerifyEmailURL   = "https://app.example/verify-email?lang=en"
	PasswordResetURL = "https://app.example/reset-password?lang=en"
)

// Env is one test's pipeline.
type Env struct {
	// URL is the test database's; DB is a store over it with the worker's
	// session settings (lock_timeout 5s, idle_in_transaction 60s); Pool is a
	// raw pool over it, for what tests do behind the store's back.
	URL  string
	DB   *postgres.DB
	Pool *pgxpool.Pool
	// Writes are DB's writes as tests make them, each its own unkeyed
	// unit of work (see pgtest.DB).
	Writes *pgtest.DB

	SQS              *sqs.Client
	QueueURL, DLQURL string

	SESEndpoint string
	Sender      *mail.Sender

	// Logs receives the worker's JSON lines and EMF lines.
	Logs *LogBuffer
}

// Options shape the queue of an Env.
type Options struct {
	// VisibilityTimeout in seconds; zero means 30.
	VisibilityTimeout int
	// MaxReceiveCount before the DLQ; zero means 5.
	MaxReceiveCount int
}

var queueSeq atomic.Int64

// New builds an Env for tb. The SQS and SES stand-ins are shared by the
// tests of the process; the database and the queues are tb's own.
func New(tb testing.TB, o Options) *Env {
	tb.Helper()
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = 30
	}
	if o.MaxReceiveCount == 0 {
		o.MaxReceiveCount = 5
	}
	ctx := context.Background()
	e := &Env{URL: pgtest.NewURL(tb), Logs: &LogBuffer{}}
	e.DB = OpenWorkerDB(tb, e.URL)
	e.Pool = pgtest.Pool(tb, e.URL)
	e.Writes = &pgtest.DB{DB: e.DB, Pool: e.Pool, URL: e.URL}

	e.SQS = localaws.NewSQSClient(localaws.SQS(tb).Endpoint)
	name := fmt.Sprintf("status-%d-%d", time.Now().UnixNano(), queueSeq.Add(1))
	var err error
	e.QueueURL, e.DLQURL, err = localaws.CreateQueueWithDLQ(ctx, e.SQS, name, o.VisibilityTimeout, o.MaxReceiveCount)
	if err != nil {
		tb.Fatal(err)
	}

	e.SESEndpoint = localaws.SES(tb).Endpoint
	e.Sender, err = mail.NewSender(localaws.NewSESClient(e.SESEndpoint), MailFrom)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// OpenWorkerDB opens a store over url with the worker's session settings
// (and pgtest's: TEST_DATABASE_QUERY_EXEC_MODE), closed when tb ends.
func OpenWorkerDB(tb testing.TB, url string) *postgres.DB {
	tb.Helper()
	return pgtest.Open(tb, url, postgres.WorkerSession(5*time.Second, time.Minute)).DB
}

// Handler returns a worker handler over the Env's database that sends
// through m, gives failed records their backoff on the Env's queue, and
// logs (at DEBUG) to e.Logs; adjust changes the configuration.
func (e *Env) Handler(tb testing.TB, m jobboard.Mailer, adjust ...func(*worker.Config)) *worker.Handler {
	tb.Helper()
	c := worker.Config{
		Store:            e.DB,
		Suppressions:     e.DB,
		Mailer:           m,
		VerifyEmailURL:   VerifyEmailURL,
		PasswordResetURL: PasswordResetURL,
		Redelivery:       queue.NewRedeliverer(e.SQS, e.QueueURL),
		Logger:           slog.New(slog.NewJSONHandler(e.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:          e.Logs,
	}
	for _, f := range adjust {
		f(&c)
	}
	h, err := worker.New(c)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// Poller returns a poller of the Env's queue that invokes h, with short
// long-polls so that tests stay quick.
func (e *Env) Poller(h *worker.Handler) *eventsource.Poller {
	return &eventsource.Poller{Client: e.SQS, QueueURL: e.QueueURL, Handler: h.Handle, WaitTimeSeconds: 1}
}

// Publisher returns a queue.Publisher to the Env's queue.
func (e *Env) Publisher() *queue.Publisher { return queue.NewPublisher(e.SQS, e.QueueURL) }

// App is an application with everything around it.
type App struct {
	ID             int64
	Employer       jobboard.Actor
	Candidate      jobboard.Actor
	CandidateEmail string
	CandidateName  string
	JobTitle       string
	CompanyName    string
}

// NewApp creates an employer with a company and an open job, and a
// candidate, with a verified address no other test uses, who has applied
// to it.
func (e *Env) NewApp(tb testing.TB) App {
	tb.Helper()
	return e.newApp(tb, true)
}

// NewUnverifiedApp is NewApp with a candidate who has not verified their
// address: no status email may reach it.
func (e *Env) NewUnverifiedApp(tb testing.TB) App {
	tb.Helper()
	return e.newApp(tb, false)
}

func (e *Env) newApp(tb testing.TB, verified bool) App {
	tb.Helper()
	ctx := context.Background()
	tag := strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	employer, err := pgtest.CreateUser(ctx, e.Pool, jobboard.Registration{
		Email: "boss-" + tag + "@example.com", Name: "Boss " + tag, Role: jobboard.RoleEmployer}, "hash")
	if err != nil {
		tb.Fatal(err)
	}
	candidate, err := pgtest.CreateUser(ctx, e.Pool, jobboard.Registration{
		Email: "sam-" + tag + "@example.com", Name: "Sam " + tag, Role: jobboard.RoleCandidate}, "hash")
	if err != nil {
		tb.Fatal(err)
	}
	emp := jobboard.Actor{UserID: employer.ID, Role: employer.Role}
	if verified {
		pgtest.MarkVerified(tb, e.Pool, candidate.ID)
	}
	cand := jobboard.Actor{UserID: candidate.ID, Role: candidate.Role}
	var (
		company jobboard.Company
		job     jobboard.Job
		app     jobboard.Application
	)
	pgtest.MustWrite(tb, e.DB, func(st jobboard.Writes) (err error) {
		if company, err = st.CreateCompany(ctx, emp, jobboard.NewCompany{Name: "Acme " + tag}); err != nil {
			return err
		}
		job, err = st.CreateJob(ctx, emp, company.ID, jobboard.NewJob{
			Title: "Backend Engineer", Description: "Go and PostgreSQL.", EmploymentType: jobboard.FullTime})
		if err != nil {
			return err
		}
		app, err = st.Apply(ctx, cand, job.ID, jobboard.NewApplication{})
		return err
	})
	return App{ID: app.ID, Employer: emp, Candidate: cand, CandidateEmail: candidate.Email,
		CandidateName: candidate.Name, JobTitle: job.Title, CompanyName: company.Name}
}

// Event returns a new status event about a, as the API would emit it (but
// without an outbox row).
func (a App) Event() jobboard.Event {
	return jobboard.Event{
		Type:          jobboard.EventTypeStatusChanged,
		EventID:       uuid.NewString(),
		OccurredAt:    time.Now().UTC().Truncate(time.Microsecond),
		ApplicationID: a.ID,
		OldStatus:     jobboard.StatusSubmitted,
		NewStatus:     jobboard.StatusReviewing,
	}
}

// Subject is the subject of the email about ev to a.
func (a App) Subject(tb testing.TB, ev jobboard.Event) string {
	tb.Helper()
	subject, _, _, err := mail.Render(jobboard.StatusEmail{
		EventID: ev.EventID, To: a.CandidateEmail, CandidateName: a.CandidateName, JobTitle: a.JobTitle,
		CompanyName: a.CompanyName, ApplicationID: a.ID, OldStatus: ev.OldStatus, NewStatus: ev.NewStatus})
	if err != nil {
		tb.Fatal(err)
	}
	return subject
}

// VerificationLink returns the verification link in an email's text body
// (the line that starts with VerifyEmailURL's scheme, host and path),
// parsed, failing tb if there is none.
func VerificationLink(tb testing.TB, email localaws.Email) *url.URL {
	tb.Helper()
	return linkIn(tb, email, VerifyEmailURL)
}

// VerificationToken is the token of the verification link in an email.
func VerificationToken(tb testing.TB, email localaws.Email) string {
	tb.Helper()
	return tokenOf(tb, email, VerificationLink(tb, email))
}

// PasswordResetLink returns the password reset link in an email's text
// body (the line that starts with PasswordResetURL's scheme, host and
// path), parsed, failing tb if there is none.
func PasswordResetLink(tb testing.TB, email localaws.Email) *url.URL {
	tb.Helper()
	return linkIn(tb, email, PasswordResetURL)
}

// PasswordResetToken is the token of the password reset link in an email.
func PasswordResetToken(tb testing.TB, email localaws.Email) string {
	tb.Helper()
	return tokenOf(tb, email, PasswordResetLink(tb, email))
}

// linkIn returns the link to the page of baseURL in an email's text body.
func linkIn(tb testing.TB, email localaws.Email, baseURL string) *url.URL {
	tb.Helper()
	base, err := url.Parse(baseURL)
	if err != nil {
		tb.Fatal(err)
	}
	prefix := base.Scheme + "://" + base.Host + base.Path + "?"
	for _, line := range strings.Split(email.Body.Text, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, prefix) {
			u, err := url.Parse(line)
			if err != nil {
				tb.Fatalf("link %q: %v", line, err)
			}
			return u
		}
	}
	tb.Fatalf("no line starting with %s in the email's text:\n%s", prefix, email.Body.Text)
	return nil
}

// tokenOf is the token of a link in an email.
func tokenOf(tb testing.TB, email localaws.Email, link *url.URL) string {
	tb.Helper()
	token := link.Query().Get("token")
	if token == "" {
		tb.Fatalf("link without a token in:\n%s", email.Body.Text)
	}
	return token
}

// Body is the message body of ev.
func Body(tb testing.TB, ev jobboard.Event) string {
	tb.Helper()
	b, err := jobboard.EncodeEvent(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// SendBody puts a message with body on the Env's queue and returns its
// message id.
func (e *Env) SendBody(tb testing.TB, body string) string {
	tb.Helper()
	out, err := e.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(e.QueueURL), MessageBody: aws.String(body)})
	if err != nil {
		tb.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

// Receive receives up to n messages from the queue (waiting up to a second)
// and returns them as Lambda would hand them to the worker, without
// deleting them.
func (e *Env) Receive(tb testing.TB, n int32) events.SQSEvent {
	tb.Helper()
	out, err := e.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(e.QueueURL), MaxNumberOfMessages: n, WaitTimeSeconds: 1})
	if err != nil {
		tb.Fatal(err)
	}
	var ev events.SQSEvent
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), EventSource: "aws:sqs"})
	}
	return ev
}

// Depth returns the messages in a queue, visible, in flight or delayed.
func (e *Env) Depth(tb testing.TB, queueURL string) int {
	tb.Helper()
	n, err := localaws.QueueDepth(context.Background(), e.SQS, queueURL)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// Drain polls the queue with p until it is empty (nothing visible or in
// flight), failing tb after timeout.
func (e *Env) Drain(tb testing.TB, p *eventsource.Poller, timeout time.Duration) {
	tb.Helper()
	Eventually(tb, timeout, "queue drained", func() bool {
		if _, _, err := p.PollOnce(context.Background()); err != nil {
			tb.Logf("poll: %v", err)
		}
		return e.Depth(tb, e.QueueURL) == 0
	})
}

// EmailsTo returns the emails the SES stand-in accepted for to.
func (e *Env) EmailsTo(tb testing.TB, to string) []localaws.Email {
	tb.Helper()
	got, err := localaws.EmailsTo(context.Background(), e.SESEndpoint, to)
	if err != nil {
		tb.Fatal(err)
	}
	return got
}

// Claim is a processed_events row.
type Claim struct {
	EventID string
	// Outcome is "" while the claim is unfinished.
	Outcome  string
	Attempts int
}

// Claims returns the claim rows of an event id (zero or one).
func (e *Env) Claims(tb testing.TB, eventID string) []Claim {
	tb.Helper()
	rows, err := e.Pool.Query(context.Background(),
		`SELECT event_id, coalesce(outcome, ''), attempts FROM processed_events WHERE event_id = $1`, eventID)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var cs []Claim
	for rows.Next() {
		var c Claim
		if err := rows.Scan(&c.EventID, &c.Outcome, &c.Attempts); err != nil {
			tb.Fatal(err)
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return cs
}

// Eventually calls cond until it returns true, failing tb after timeout.
// It is how these tests wait for SQS (a visibility timeout to pass, a
// message to reach the DLQ): a condition with a deadline, never a sleep.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for: %s", timeout, what)
		}
		<-tick.C
	}
}

// FlakyMailer wraps a real Mailer and fails the calls that Fail picks. It
// is the one fake of these tests: failures are injected at the mail-sender
// interface and nowhere else.
type FlakyMailer struct {
	Next jobboard.Mailer
	// Fail is called before each status email with its number (from 1,
	// counting every email); a non-nil error is returned instead of
	// sending. Nil Fail passes every call.
	Fail func(call int, e jobboard.StatusEmail) error
	// FailVerification is Fail for verification emails.
	FailVerification func(call int, e jobboard.VerificationEmail) error
	// FailPasswordReset is Fail for password reset emails.
	FailPasswordReset func(call int, e jobboard.PasswordResetEmail) error

	mu    sync.Mutex
	calls int
	sent  int
}

// SendStatusEmail implements jobboard.Mailer.
func (m *FlakyMailer) SendStatusEmail(ctx context.Context, e jobboard.StatusEmail) (string, error) {
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	if m.Fail != nil {
		if err := m.Fail(n, e); err != nil {
			return "", err
		}
	}
	id, err := m.Next.SendStatusEmail(ctx, e)
	if err == nil {
		m.mu.Lock()
		m.sent++
		m.mu.Unlock()
	}
	return id, err
}

// SendVerificationEmail implements jobboard.Mailer.
func (m *FlakyMailer) SendVerificationEmail(ctx context.Context, e jobboard.VerificationEmail) (string, error) {
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	if m.FailVerification != nil {
		if err := m.FailVerification(n, e); err != nil {
			return "", err
		}
	}
	id, err := m.Next.SendVerificationEmail(ctx, e)
	if err == nil {
		m.mu.Lock()
		m.sent++
		m.mu.Unlock()
	}
	return id, err
}

// SendPasswordResetEmail implements jobboard.Mailer.
func (m *FlakyMailer) SendPasswordResetEmail(ctx context.Context, e jobboard.PasswordResetEmail) (string, error) {
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	if m.FailPasswordReset != nil {
		if err := m.FailPasswordReset(n, e); err != nil {
			return "", err
		}
	}
	id, err := m.Next.SendPasswordResetEmail(ctx, e)
	if err == nil {
		m.mu.Lock()
		m.sent++
		m.mu.Unlock()
	}
	return id, err
}

// Calls returns how many sends were attempted, and how many reached the
// mail service and succeeded.
func (m *FlakyMailer) Calls() (attempted, sent int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls, m.sent
}

// LogBuffer collects the JSON log lines of several goroutines.
type LogBuffer struct {
	syncio.Buffer
}

// Lines returns every line written so far, decoded as JSON objects.
func (b *LogBuffer) Lines(tb testing.TB) []map[string]any {
	tb.Helper()
	lines, err := b.JSONLines()
	if err != nil {
		tb.Fatal(err)
	}
	return lines
}

// Records returns the one final log line of each record handled (those
// with an outcome other than the DEBUG "claimed").
func (b *LogBuffer) Records(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, l := range b.Lines(tb) {
		if o, ok := l["outcome"]; ok && o != "claimed" {
			out = append(out, l)
		}
	}
	return out
}

// Claimed returns the DEBUG lines written when a record's claim was taken.
func (b *LogBuffer) Claimed(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, l := range b.Lines(tb) {
		if l["outcome"] == "claimed" {
			out = append(out, l)
		}
	}
	return out
}

// Metrics returns the EMF lines.
func (b *LogBuffer) Metrics(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, l := range b.Lines(tb) {
		if _, ok := l["_aws"]; ok {
			out = append(out, l)
		}
	}
	return out
}
