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
// ACCOUNT_EMAILS_QUEUE_URL (the queue of the verification and password
// reset emails, so that they never wait behind status emails; without it
// they go to the status events queue);
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
// WEBHOOK_SEALING_KEY_SECRET_ARN, WEBHOOK_ALLOW_INSECURE (see settings.Webhooks).
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
	"time"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/functions/api/settings"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/secret"
)

func main() { function.Main("api", run) }

// run is main without the process, which the tests call: the settings,
// then the wiring (see function.Run).
var run = function.Run(settings.Load, wire)

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

// loadTokenKeys returns the token signing keys of key: JWT_SECRET, or on
// AWS the secret named by JWT_SECRET_ARN (its current and previous
// versions, looked up again as they rotate). The first lookup happens here,
// so that a missing or malformed secret fails the cold start. Locally
// (lambda false), when key names none, a random key is made (tokens then
// do not survive a restart); in Lambda that is an error.
func loadTokenKeys(ctx context.Context, lambda bool, key secret.Key, newClient func() (secret.Getter, error), logger *slog.Logger) (httpapi.TokenKeySource, error) {
	src, err := secret.NewJWTKeySource(key, newClient)
	if errors.Is(err, secret.ErrNotConfigured) && !lambda {
		logger.WarnContext(ctx, "JWT_SECRET is not set: using a random key, so tokens will not survive a restart")
		src, err = secret.NewJWTKeySource(secret.Key{Value: rand.Text() + rand.Text()}, newClient)
	}
	if err != nil {
		return nil, err
	}
	keys, err := src.Keys(ctx, false)
	if err != nil {
		return nil, err
	}
	if len(keys.Current) < minSecretLen {
		return nil, fmt.Errorf("JWT_SECRET is %d bytes; at least %d are required", len(keys.Current), minSecretLen)
	}
	return tokenKeys(src), nil
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

// wire builds the API from its settings: it looks up its secrets (the JWT
// keys, the webhook sealing key, the database's; see package secret),
// opens the database, and builds the handler. Inside Lambda the handler
// serves API Gateway HTTP API (payload v2) events, each with a deadline
// answerMargin before the invocation's, over Lambda's pool, and writes a
// metric line per request to stdout (the log stream); outside, it serves
// HTTP on 127.0.0.1:PORT until ctx ends (serveLocal).
func wire(ctx context.Context, s settings.Settings, stdout io.Writer) (*function.Wiring, error) {
	logger := s.Logger(stdout)
	secrets := secret.NewClient(s.AWS) // used only when a secret comes from Secrets Manager
	keys, err := loadTokenKeys(ctx, s.Lambda, s.JWTKey, secrets, logger)
	if err != nil {
		return nil, err
	}
	sealer, err := loadSealer(ctx, s.Lambda, s.Webhooks.SealingKey, secrets, logger)
	if err != nil {
		return nil, err
	}
	var metrics io.Writer
	options := []func(*pgxpool.Config){postgres.WithStatementTimeout(s.StatementTimeout)}
	if s.Lambda {
		metrics = stdout
		options = append(options, lambdaPool)
	}
	db, err := database.Open(ctx, s.DB, secrets, options...)
	if err != nil {
		return nil, err
	}
	h := newHandler(ctx, s, db, keys, sealer, logger, metrics)
	return &function.Wiring{
		Handler: httpadapter.NewV2(withAnswerMargin(h, answerMargin)).ProxyWithContext,
		Local:   func(ctx context.Context) error { return serveLocal(ctx, s.Port, h, logger) },
		Close:   db.Close,
	}, nil
}

// newHandler wires the API handler over db, with the event relay when one
// is configured; metrics, when not nil, gets a metric line per request.
func newHandler(ctx context.Context, s settings.Settings, db *postgres.DB, keys httpapi.TokenKeySource, sealer jobboard.SecretSealer, logger *slog.Logger, metrics io.Writer) http.Handler {
	relay := eventRelay(ctx, s.QueueURL, s.AccountQueueURL, s.Webhooks.QueueURL, s.AWS, db, logger)
	return httpapi.NewServer(httpapi.Config{
		RequestID:    gatewayRequestID,
		Writes:       db,
		Users:        db,
		Companies:    db,
		Jobs:         db,
		Applications: db,
		Suppressions: db,
		Pinger:       db,
		Logins:       db,
		Relay:        relay,
		Logger:       logger,
		TokenKeys:    keys,

		ClientAddress:        gatewaySourceIP,
		PasswordHashes:       s.PasswordHashes,
		PublicMaxAge:         s.PublicMaxAge,
		StaleWhileRevalidate: s.StaleWhileRevalidate,
		CORSAllowedOrigins:   s.CORSOrigins,
		Metrics:              metrics,
		FunctionVersion:      s.Version,

		Webhooks:      db,
		WebhookSealer: sealer,
		WebhookURLs:   s.Webhooks.URLs,
	})
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

// serveLocal serves h on 127.0.0.1:port until ctx ends (main ends it on
// SIGINT or SIGTERM), then drains in-flight requests.
func serveLocal(ctx context.Context, port string, h http.Handler, logger *slog.Logger) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
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
