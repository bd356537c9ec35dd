// Command api is the job board's HTTP API. Inside AWS Lambda (when
// AWS_LAMBDA_RUNTIME_API is set) it serves API Gateway HTTP API events
// (payload v2) through the aws-lambda-go-api-proxy adapter; elsewhere it
// serves plain HTTP on 127.0.0.1:PORT until SIGINT or SIGTERM. It does not
// migrate the database: `make migrate` (internal/dev/cmd/migrate) does, and
// `make dev` runs it first.
//
// Environment: DATABASE_URL, or on AWS DATABASE_SECRET_ARN (required, with
// the optional DATABASE_HOST and DATABASE_SSLROOTCERT, see internal/secret);
// JWT_SECRET, or on AWS JWT_SECRET_ARN (at least 32 bytes; required in
// Lambda, generated per process locally when unset); PORT (default 8080);
// LOG_LEVEL (debug, info, warn, error; default info); STATUS_EVENTS_QUEUE_URL
// (the queue that committed status events are published to right away;
// without it they wait in the outbox for the sweeper);
// DATABASE_STATEMENT_TIMEOUT (a Go duration, default 5s: the database stops
// any statement of the API that runs longer, and the request answers 503);
// DATABASE_QUERY_EXEC_MODE (pgx's query exec mode: cache_statement, the
// default, or behind RDS Proxy one that prepares no named statement, see
// docs/performance.md);
// CORS_ALLOWED_ORIGINS (comma-separated origins whose browsers may call the
// API; empty: no CORS); CACHE_MAX_AGE and CACHE_STALE_WHILE_REVALIDATE
// (durations such as 30s: the Cache-Control of anonymous job searches, jobs
// and companies); PASSWORD_HASH_CONCURRENCY (how many argon2id hashes may
// run at once; default: one per core, fewer if a quarter of the memory
// cannot hold them); WEBHOOK_EVENTS_QUEUE_URL, WEBHOOK_SEALING_KEY or on AWS
// WEBHOOK_SEALING_KEY_SECRET_ARN, WEBHOOK_ALLOW_INSECURE (see webhook.go).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/secret"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

// minSecretLen is the shortest JWT_SECRET accepted: HS256 wants a key of at
// least the hash size.
const minSecretLen = 32

// HTTP server timeouts for local mode. WriteTimeout covers the slowest
// handler (a password hash plus a few queries) with a wide margin.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 10 * time.Second
)

// defaultStatementTimeout bounds every statement of the API unless
// DATABASE_STATEMENT_TIMEOUT says otherwise: well under the function's
// 10 s timeout, far above any search served by an index.
const defaultStatementTimeout = 5 * time.Second

// config is what run reads from the environment (loadConfig), and the
// secrets it looks up before it serves (loadDatabaseURL, loadJWTSecret).
type config struct {
	function.Settings
	databaseURL      string
	statementTimeout time.Duration
	queryExecMode    pgx.QueryExecMode
	// dbCredentials keep the user and password of new connections current
	// when they come from Secrets Manager; nil locally.
	dbCredentials *secret.DatabaseCredentials
	// tokenKeys gives the JWT signing keys, current and previous.
	tokenKeys httpapi.TokenKeySource
	port      string
	// queueURL is where committed status events are published right away;
	// empty: they wait in the outbox for the sweeper.
	queueURL string
	// corsOrigins, publicMaxAge and staleWhileRevalidate are the HTTP
	// settings of httpapi.Config of the same names.
	corsOrigins                        []string
	publicMaxAge, staleWhileRevalidate time.Duration
	// passwordHashes is httpapi.Config.PasswordHashes.
	passwordHashes int
	// webhooks are the webhook settings (webhook.go).
	webhooks webhookSettings
}

// loadConfig reads the plain settings; the secrets come from
// loadDatabaseURL and loadJWTSecret.
func loadConfig(getenv func(string) string) (config, error) {
	shared, err := function.Load(getenv)
	if err != nil {
		return config{}, err
	}
	c := config{
		Settings: shared,
		port:     getenv("PORT"),
		queueURL: getenv("STATUS_EVENTS_QUEUE_URL"),
	}
	if c.port == "" {
		c.port = "8080"
	}
	c.statementTimeout = defaultStatementTimeout
	if v := getenv("DATABASE_STATEMENT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond {
			return c, fmt.Errorf("DATABASE_STATEMENT_TIMEOUT %q: want a duration of at least 1ms, such as 5s", v)
		}
		c.statementTimeout = d
	}
	if c.queryExecMode, err = postgres.ParseQueryExecMode(getenv("DATABASE_QUERY_EXEC_MODE")); err != nil {
		return c, fmt.Errorf("DATABASE_QUERY_EXEC_MODE: %w", err)
	}
	origins, err := httpapi.ParseAllowedOrigins(getenv("CORS_ALLOWED_ORIGINS"))
	if err != nil {
		return c, fmt.Errorf("CORS_ALLOWED_ORIGINS: %w", err)
	}
	c.corsOrigins = origins
	if c.publicMaxAge, err = cacheDuration("CACHE_MAX_AGE", getenv("CACHE_MAX_AGE")); err != nil {
		return c, err
	}
	if c.staleWhileRevalidate, err = cacheDuration("CACHE_STALE_WHILE_REVALIDATE", getenv("CACHE_STALE_WHILE_REVALIDATE")); err != nil {
		return c, err
	}
	if c.passwordHashes, err = passwordHashes(getenv); err != nil {
		return c, err
	}
	if c.webhooks, err = loadWebhookSettings(getenv); err != nil {
		return c, err
	}
	return c, nil
}

// cacheDuration reads a caching setting: empty means the default (zero), else
// a duration of at least a second (Cache-Control counts in seconds).
func cacheDuration(name, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("%s = %q: want a duration of at least 1s, such as 30s", name, v)
	}
	return d, nil
}

// loadDatabaseURL sets the database URL: DATABASE_URL, or on AWS the secret
// named by DATABASE_SECRET_ARN.
func (c *config) loadDatabaseURL(ctx context.Context, getenv func(string) string, newClient func() (secret.Getter, error)) error {
	u, creds, err := secret.Database(ctx, getenv, newClient)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	c.databaseURL, c.dbCredentials = u, creds
	return nil
}

// loadJWTSecret sets the token signing keys: JWT_SECRET, or on AWS the
// secret named by JWT_SECRET_ARN (its current and previous versions, looked
// up again as they rotate). The first lookup happens here, so that a
// missing or malformed secret fails the cold start. Locally, when neither
// is set, a random key is made (tokens then do not survive a restart); in
// Lambda that is an error.
func (c *config) loadJWTSecret(ctx context.Context, getenv func(string) string, newClient func() (secret.Getter, error), logger *slog.Logger) error {
	src, err := secret.NewJWTKeySource(getenv, newClient)
	if errors.Is(err, secret.ErrNotConfigured) && !c.Lambda {
		logger.WarnContext(ctx, "JWT_SECRET is not set: using a random key, so tokens will not survive a restart")
		key := rand.Text() + rand.Text()
		src, err = secret.NewJWTKeySource(func(string) string { return key }, newClient)
	}
	if err != nil {
		return err
	}
	keys, err := src.Keys(ctx, false)
	if err != nil {
		return err
	}
	if len(keys.Current) < minSecretLen {
		return fmt.Errorf("JWT_SECRET is %d bytes; at least %d are required", len(keys.Current), minSecretLen)
	}
	c.tokenKeys = tokenKeys(src)
	return nil
}

// previousKeyWindow is how long after a rotation tokens signed with the
// previous key are still accepted: the lifetime of a token issued just
// before the rotation, plus the time a warm sandbox may go on signing with
// the previous key before it looks the secret up again.
const previousKeyWindow = httpapi.DefaultTokenTTL + secret.DefaultMaxAge

// tokenKeys adapts the secret's keys to the API's: the previous key
// verifies until previousKeyWindow after the current one was created.
func tokenKeys(src *secret.JWTKeySource) httpapi.TokenKeySource {
	return func(ctx context.Context, refresh bool) (httpapi.TokenKeys, error) {
		keys, err := src.Keys(ctx, refresh)
		if err != nil {
			return httpapi.TokenKeys{}, err
		}
		return httpapi.TokenKeys{
			Current:       keys.Current,
			Previous:      keys.Previous,
			PreviousUntil: keys.CurrentSince.Add(previousKeyWindow),
		}, nil
	}
}

// run is main without the process: it returns instead of exiting, and takes
// the arguments, environment and output as parameters so that tests can call
// it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unknown command %q: the API takes none (migrations: make migrate)", args[1])
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout)
	secrets := secret.NewClient(cfg.AWS) // used only when a secret comes from Secrets Manager
	if err := cfg.loadDatabaseURL(ctx, getenv, secrets); err != nil {
		return err
	}
	if err := cfg.loadJWTSecret(ctx, getenv, secrets, logger); err != nil {
		return err
	}
	if err := cfg.webhooks.loadSealer(ctx, cfg.Lambda, getenv, secrets, logger); err != nil {
		return err
	}
	if cfg.Lambda {
		return runLambda(ctx, cfg, logger, stdout)
	}
	return serveLocal(ctx, cfg, logger)
}

// newHandler opens the database and wires the API handler, with the event
// relay when one is configured; metrics, when not nil, gets a metric line
// per request. close releases the database.
func newHandler(ctx context.Context, cfg config, logger *slog.Logger, metrics io.Writer, poolOptions ...func(*pgxpool.Config)) (h http.Handler, closeDB func(), err error) {
	if cfg.dbCredentials != nil {
		poolOptions = append(poolOptions, postgres.WithCredentials(cfg.dbCredentials))
	}
	poolOptions = append(poolOptions, postgres.WithStatementTimeout(cfg.statementTimeout),
		postgres.WithQueryExecMode(cfg.queryExecMode))
	db, err := postgres.Open(ctx, cfg.databaseURL, poolOptions...)
	if err != nil {
		return nil, nil, err
	}
	relay := eventRelay(ctx, cfg.queueURL, cfg.webhooks.queueURL, cfg.AWS, db, logger)
	h = httpapi.NewServer(httpapi.Config{
		RequestID:    gatewayRequestID,
		Users:        db,
		Companies:    db,
		Jobs:         db,
		Applications: db,
		Pinger:       db,
		Logins:       db,
		Relay:        relay,
		Logger:       logger,
		TokenKeys:    cfg.tokenKeys,

		Idempotency:          db,
		ClientAddress:        gatewaySourceIP,
		PasswordHashes:       cfg.passwordHashes,
		PublicMaxAge:         cfg.publicMaxAge,
		StaleWhileRevalidate: cfg.staleWhileRevalidate,
		CORSAllowedOrigins:   cfg.corsOrigins,
		Metrics:              metrics,
		FunctionVersion:      cfg.Version,

		Webhooks:      db,
		WebhookSealer: cfg.webhooks.sealer,
		WebhookURLs:   cfg.webhooks.urls,
	})
	return h, db.Close, nil
}

// lambdaPool sizes the pool for a Lambda sandbox, which serves one request
// at a time: a couple of connections, closed when idle so that frozen
// sandboxes do not hold many server connections.
func lambdaPool(c *pgxpool.Config) {
	c.MaxConns = 2
	c.MinConns = 0
	c.MaxConnIdleTime = time.Minute
}

// gatewayRequestID is API Gateway's request id of a request that came
// through the Lambda proxy adapter, or "" (served locally): the API's log
// lines then carry the id of the gateway's access log.
func gatewayRequestID(r *http.Request) string {
	gw, _ := core.GetAPIGatewayV2ContextFromContext(r.Context())
	return gw.RequestID
}

// gatewaySourceIP is the client address API Gateway saw (the request
// context's sourceIp) of a request that came through the Lambda proxy
// adapter, or "" (served locally: the connection's address counts). Never
// a forwarded-for header, which the client writes.
func gatewaySourceIP(r *http.Request) string {
	gw, _ := core.GetAPIGatewayV2ContextFromContext(r.Context())
	return gw.HTTP.SourceIP
}

// runLambda serves API Gateway HTTP API (payload v2) events, each with a
// deadline answerMargin before the invocation's, and writes a metric line
// per request to stdout (the log stream). lambda.Start does not return.
func runLambda(ctx context.Context, cfg config, logger *slog.Logger, stdout io.Writer) error {
	h, closeDB, err := newHandler(ctx, cfg, logger, stdout, lambdaPool)
	if err != nil {
		return err
	}
	defer closeDB()
	lambda.StartWithOptions(httpadapter.NewV2(withAnswerMargin(h, answerMargin)).ProxyWithContext, lambda.WithContext(ctx))
	return nil
}

// serveLocal serves HTTP on 127.0.0.1:PORT until ctx ends (main ends it on
// SIGINT or SIGTERM), then drains in-flight requests.
func serveLocal(ctx context.Context, cfg config, logger *slog.Logger) error {
	h, closeDB, err := newHandler(ctx, cfg, logger, nil)
	if err != nil {
		return err
	}
	defer closeDB()

	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", cfg.port))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.InfoContext(ctx, "listening", slog.String("addr", "http://"+ln.Addr().String()))

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.InfoContext(ctx, "shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
