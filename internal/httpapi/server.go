package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Pinger reports whether the database answers; /readyz calls it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config is what the server needs. The four stores, Writes and TokenKey
// or TokenKeys are required; the rest have defaults.
type Config struct {
	// Writes runs every write of a POST, PATCH or DELETE as one unit of
	// work, and keeps the answers of those sent with an Idempotency-Key.
	Writes       jobboard.WriteStore
	Users        jobboard.UserStore
	Companies    jobboard.CompanyStore
	Jobs         jobboard.JobStore
	Applications jobboard.ApplicationStore
	// Pinger backs /readyz. Nil: /readyz always answers 503.
	Pinger Pinger
	// Relay, when set, publishes the events a write committed right after
	// its commit. A failure is logged (WARN) and does not change the
	// answer: the outbox row stays unpublished for the sweeper.
	Relay jobboard.EventRelay
	// Logger receives the access log and errors. Nil: logs are discarded.
	Logger *slog.Logger
	// RequestID gives the id a request arrived with, such as API Gateway's
	// (functions/api reads it from the Lambda proxy's context), so that the
	// log lines join the gateway's access log; "" or a nil RequestID: a
	// random id is made here.
	RequestID func(*http.Request) string
	// TokenKey signs and verifies the HS256 bearer tokens. It should be at
	// least 32 random bytes. Empty: every token is refused and none is issued
	// (the server fails closed).
	TokenKey []byte
	// TokenKeys, when set, is asked for the keys instead of TokenKey: a
	// current key that signs, and during a rotation the previous one, which
	// still verifies tokens for a while (see TokenKeys).
	TokenKeys TokenKeySource
	// TokenTTL is how long an issued token is valid. Zero: DefaultTokenTTL.
	TokenTTL time.Duration
	// Password sets the argon2id cost of new password hashes. Zero:
	// DefaultPasswordParams. Tests use cheaper ones.
	Password PasswordParams
	// PasswordHashes bounds the argon2id computations running at once
	// (registrations, logins). Zero: PasswordHashConcurrency of the cores,
	// with the memory unknown (functions/api passes what it knows).
	PasswordHashes int
	// PasswordHashWait is how long a request waits for a free slot before
	// it answers 503 with Retry-After. Zero: DefaultPasswordHashWait.
	PasswordHashWait time.Duration
	// Logins counts failed attempts and blocks what fails too often
	// (answering 429 with Retry-After): logins to one account from one
	// client, and one client's credential attempts across accounts (logins,
	// registrations of taken addresses, email verifications). Nil: no
	// backoff.
	Logins jobboard.LoginThrottle
	// LoginPolicy says when and for how long an account is blocked for one
	// client. Zero: jobboard.DefaultLoginPolicy.
	LoginPolicy jobboard.LoginPolicy
	// ClientPolicy says when and for how long a client is blocked across
	// accounts. Zero: jobboard.DefaultClientPolicy.
	ClientPolicy jobboard.LoginPolicy
	// ClientAddress gives the address of the client that sent a request,
	// as the network saw it: functions/api gives API Gateway's sourceIp.
	// Nil, or "": the connection's remote address. A forwarded-for header
	// is never read: any client can write one.
	ClientAddress func(*http.Request) string
	// VerificationPolicy bounds the verification emails per account and
	// per address. Zero: jobboard.DefaultVerificationPolicy.
	VerificationPolicy jobboard.VerificationPolicy
	// PasswordResetPolicy bounds the password reset emails per address.
	// Zero: jobboard.DefaultPasswordResetPolicy.
	PasswordResetPolicy jobboard.VerificationPolicy
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// PublicMaxAge and StaleWhileRevalidate make the Cache-Control of
	// anonymous job searches, jobs and companies. Zero: DefaultPublicMaxAge
	// and DefaultStaleWhileRevalidate.
	PublicMaxAge, StaleWhileRevalidate time.Duration
	// CORSAllowedOrigins lists the origins whose browsers may call the API
	// (see ParseAllowedOrigins). Empty: no CORS header fields at all.
	CORSAllowedOrigins []string
	// Metrics, when set, receives one CloudWatch Embedded Metric Format
	// line per request (Requests 1, ServerErrors 1 for a 5xx answer, else
	// 0), by FunctionVersion too: what a deploy's rollback alarm reads to
	// see the failures of the version being deployed, which answers them
	// itself (a recovered panic is a 500, not a Lambda error). In Lambda it
	// is stdout. Nil: no metric lines.
	Metrics io.Writer
	// FunctionVersion is the Lambda function version serving (see
	// Metrics); empty outside Lambda.
	FunctionVersion string

	// Webhooks keeps the companies' webhook endpoints and their delivery
	// log, and WebhookSealer seals their signing secrets; without both the
	// webhook routes answer 503. WebhookURLs is what an endpoint's URL may
	// be (the zero value: https on 443, no internal address).
	Webhooks      jobboard.WebhookStore
	WebhookSealer jobboard.SecretSealer
	WebhookURLs   jobboard.WebhookURLPolicy
	// WebhookDispatches bounds the pings and replays of an endpoint and
	// of a company. Zero: jobboard.DefaultWebhookDispatchPolicy.
	WebhookDispatches jobboard.WebhookDispatchPolicy

	// Suppressions tells GET /v1/me whether the account's address is on
	// the suppression list. Nil: every address is reported deliverable,
	// and POST /v1/me/email-delivery/resume (which lifts a complaint
	// through Writes) answers 503.
	Suppressions jobboard.SuppressionList
}

// relayTimeout bounds the fast-path publish of an event. It runs
// detached from the client's cancellation: a client that hangs up must not
// abort a publish that the sweeper would otherwise have to redo.
const relayTimeout = 5 * time.Second

// readyTimeout bounds the database ping of /readyz.
const readyTimeout = 2 * time.Second

// server holds the dependencies shared by the handlers: its Config, with
// the defaults filled in, and what newServer builds from it.
type server struct {
	Config
	tokens    tokenIssuer
	passwords passwordHasher
	hashing   hashLimiter
	// fingerprints keys the fingerprints of Idempotency-Key requests.
	fingerprints *fingerprinter
	mux          *http.ServeMux
	routes       []route // registered routes, for tests
	publicCache  string  // Cache-Control of anonymous public reads
}

// NewServer returns the HTTP handler of the job-board API: every route of
// routes.go behind the request-id, logging and panic-recovery middleware,
// CORS, and Cache-Control: no-store unless an answer says otherwise.
func NewServer(cfg Config) http.Handler {
	s := newServer(cfg)
	return s.observe(s.cors(noStoreByDefault(s.mux)))
}

func newServer(cfg Config) *server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.TokenKeys == nil {
		cfg.TokenKeys = staticKey(cfg.TokenKey)
	}
	if cfg.Password == (PasswordParams{}) {
		cfg.Password = DefaultPasswordParams
	}
	if cfg.PasswordHashes <= 0 {
		cfg.PasswordHashes = PasswordHashConcurrency(runtime.GOMAXPROCS(0), 0, cfg.Password)
	}
	if cfg.PasswordHashWait <= 0 {
		cfg.PasswordHashWait = DefaultPasswordHashWait
	}
	if cfg.LoginPolicy == (jobboard.LoginPolicy{}) {
		cfg.LoginPolicy = jobboard.DefaultLoginPolicy
	}
	if cfg.ClientPolicy == (jobboard.LoginPolicy{}) {
		cfg.ClientPolicy = jobboard.DefaultClientPolicy
	}
	if cfg.PublicMaxAge <= 0 {
		cfg.PublicMaxAge = DefaultPublicMaxAge
	}
	if cfg.StaleWhileRevalidate <= 0 {
		cfg.StaleWhileRevalidate = DefaultStaleWhileRevalidate
	}
	if cfg.VerificationPolicy == (jobboard.VerificationPolicy{}) {
		cfg.VerificationPolicy = jobboard.DefaultVerificationPolicy
	}
	if cfg.PasswordResetPolicy == (jobboard.VerificationPolicy{}) {
		cfg.PasswordResetPolicy = jobboard.DefaultPasswordResetPolicy
	}
	if cfg.WebhookDispatches == (jobboard.WebhookDispatchPolicy{}) {
		cfg.WebhookDispatches = jobboard.DefaultWebhookDispatchPolicy
	}
	s := &server{
		Config:       cfg,
		tokens:       tokenIssuer{keys: cfg.TokenKeys, ttl: cfg.TokenTTL, now: cfg.Now},
		passwords:    newPasswordHasher(cfg.Password),
		hashing:      newHashLimiter(cfg.PasswordHashes, cfg.PasswordHashWait),
		fingerprints: newFingerprinter(cfg.TokenKeys),
		mux:          http.NewServeMux(),
		publicCache:  publicCacheControl(cfg.PublicMaxAge, cfg.StaleWhileRevalidate),
	}
	s.addRoutes()
	return s
}

// apiFunc is the shape of every handler: it writes a success response, or
// returns an error for handle to turn into a problem response.
type apiFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts an apiFunc to http.Handler; it is the only place where
// handler errors are answered.
func (s *server) handle(h apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// writeError answers err as a problem (see problemFor). Unexpected errors are
// logged in full at ERROR; the client gets a generic detail and the request
// id to quote.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	p, unexpected := problemFor(err)
	log := loggerFrom(ctx, s.Logger)
	switch {
	case unexpected && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		log.WarnContext(ctx, "request cancelled by the client", slog.Any("error", err))
	case unexpected:
		log.ErrorContext(ctx, "request failed", slog.Any("error", err))
	case errors.Is(err, jobboard.ErrTimeout):
		log.WarnContext(ctx, "statement timeout", slog.Any("error", err))
	case errors.Is(err, context.DeadlineExceeded):
		log.WarnContext(ctx, "request deadline reached", slog.Any("error", err))
	}
	s.writeProblem(w, r, p, err)
}

// writeProblem writes p, with the request's path and id, the
// WWW-Authenticate challenge that a 401 requires, and the Retry-After of a
// 429 or of a 503 that says when to retry. Its errors echo at most
// maxEchoedErrors of the caller's names (see capEchoes).
func (s *server) writeProblem(w http.ResponseWriter, r *http.Request, p problem, err error) {
	ctx := r.Context()
	p.Instance = r.URL.Path
	p.RequestID = requestIDFrom(ctx)
	p.capEchoes()
	if wait, ok := retryAfter(err); ok && (p.Status == http.StatusTooManyRequests || p.Status == http.StatusServiceUnavailable) {
		w.Header().Set("Retry-After", strconv.FormatInt(max(int64(math.Ceil(wait.Seconds())), 1), 10))
	}
	if p.Status == http.StatusUnauthorized {
		challenge := `Bearer realm="jobboard"`
		var te *tokenError
		if errors.As(err, &te) || errors.Is(err, jobboard.ErrSessionRevoked) {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
	}
	if err := writeBody(w, p.Status, mediaProblem, p); err != nil {
		loggerFrom(ctx, s.Logger).ErrorContext(ctx, "write problem", slog.Any("error", err))
	}
}

// retryAfter returns how long a refused request must wait, for the errors
// that say.
func retryAfter(err error) (time.Duration, bool) {
	var (
		blocked    *jobboard.BlockedError
		throttled  *jobboard.VerificationThrottledError
		dispatches *jobboard.WebhookDispatchThrottledError
		busy       *busyError
	)
	switch {
	case errors.As(err, &blocked):
		return blocked.RetryAfter, true
	case errors.As(err, &throttled):
		return throttled.RetryAfter, true
	case errors.As(err, &dispatches):
		return dispatches.RetryAfter, true
	case errors.As(err, &busy):
		return busy.retryAfter, true
	}
	return 0, false
}

// health is the body of /healthz and /readyz.
type health struct {
	Status string `json:"status"`
}

// healthz answers 200 while the process serves requests; it checks nothing
// else, so that a database outage does not get the function restarted.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, health{Status: "ok"})
}

// readyz answers 200 when the database answers a ping, 503 otherwise.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.Pinger == nil {
		return errNoDatabase
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.Pinger.Ping(ctx); err != nil {
		loggerFrom(r.Context(), s.Logger).WarnContext(r.Context(), "readiness: database ping failed", slog.Any("error", err))
		return errDatabaseDown
	}
	return writeJSON(w, http.StatusOK, health{Status: "ok"})
}
