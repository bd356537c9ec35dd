package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/jobboard/jobboard/internal/emf"
)

// requestIDHeader carries the request id back to the client.
const requestIDHeader = "X-Request-Id"

type ctxKey int

const requestIDKey ctxKey = 0

// loggerFrom returns fallback adding the request's id to every line, or
// fallback itself outside a request. It is made when a handler logs, not
// for every request: most log nothing but their access line.
func loggerFrom(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if id := requestIDFrom(ctx); id != "" {
		return fallback.With(slog.String("request_id", id))
	}
	return fallback
}

// requestIDFrom returns the id assigned to the request, or "".
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// requestID is the id the request arrived with (Config.RequestID), or a
// random one made here.
func (s *server) requestIDOf(r *http.Request) string {
	if s.RequestID != nil {
		if id := s.RequestID(r); id != "" {
			return id
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// observe is the outermost middleware: it assigns the request id, puts it
// into the context (for loggerFrom and problems), recovers panics and
// writes one access log line per request: at DEBUG, or at ERROR for a 5xx
// (WARN for a 503). On AWS the HTTP API's access log already records every
// request with this id, its status, size and latency, so the function's log
// keeps only the requests that went wrong unless LOG_LEVEL=debug: a line
// for every request was the largest cost the API adds to a job read (a
// write to standard output each; see docs/performance.md).
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := s.requestIDOf(r)
		ctx := context.WithValue(r.Context(), requestIDKey, id)
		r = r.WithContext(ctx)
		w.Header().Set(requestIDHeader, id)
		rec := &statusRecorder{ResponseWriter: w}

		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v) // net/http's way to abort a response; it handles it
				}
				loggerFrom(ctx, s.Logger).ErrorContext(ctx, "panic in handler", slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				if !rec.wroteHeader {
					p, _ := problemFor(errPanic)
					s.writeProblem(rec, r, p, errPanic)
				}
			}
			pattern := r.Pattern
			if pattern == "" || pattern == unmatchedPattern {
				pattern = "unmatched"
			}
			level := slog.LevelDebug
			switch {
			case rec.status == http.StatusServiceUnavailable:
				level = slog.LevelWarn // overload or an outage, not a bug: logged where it starts
			case rec.status >= 500:
				level = slog.LevelError
			}
			s.logRequest(ctx, level, start,
				slog.String("request_id", id),
				slog.String("method", r.Method),
				slog.String("pattern", pattern),
				slog.Int("status", rec.status),
				slog.Int64("bytes", rec.bytes),
			)
			s.countRequest(rec.status)
		}()
		next.ServeHTTP(rec, r)
	})
}

// logRequest writes the access line of a request that started at start.
// It hands the record to the handler itself, as slog's Logger would, but
// without the caller's program counter: the source of every access line is
// this function, and looking it up (runtime.Callers) was about a quarter of
// formatting the line (0.24 of 1.0 µs, measured apart).
func (s *server) logRequest(ctx context.Context, level slog.Level, start time.Time, attrs ...slog.Attr) {
	h := s.Logger.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	now := time.Now()
	rec := slog.NewRecord(now, level, "request", 0)
	rec.AddAttrs(attrs...)
	rec.AddAttrs(slog.Duration("duration", now.Sub(start)))
	_ = h.Handle(ctx, rec) // a log line that cannot be written has nowhere to be reported
}

// countRequest writes the request's metric line (Config.Metrics).
func (s *server) countRequest(status int) {
	if s.Metrics == nil {
		return
	}
	serverErrors := 0.0
	if status >= 500 {
		serverErrors = 1
	}
	emf.WriteByVersion(s.Metrics, "api", s.FunctionVersion, s.Now(),
		emf.Metric{Name: "Requests", Unit: emf.Count, Value: 1},
		emf.Metric{Name: "ServerErrors", Unit: emf.Count, Value: serverErrors})
}

// errPanic stands for a recovered panic, which is logged where it happens.
var errPanic = errors.New("panic in handler")

// statusRecorder remembers the status and size of a response.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
}

func (r *statusRecorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// unmatchedPattern is the catch-all pattern of the mux (see unmatched).
const unmatchedPattern = "/"

// unmatched answers what no route of the API matches: a known path with a
// method it does not take gets a 405 problem with Allow, anything else a 404
// problem, instead of the mux's plain-text answers. It is registered as the
// mux's catch-all, so a request is matched once, not looked up first to
// find out whether the mux has a route for it.
func (s *server) unmatched(w http.ResponseWriter, r *http.Request) {
	if allow := s.allowed(r); allow != "" {
		w.Header().Set("Allow", allow)
		s.writeProblem(w, r, newProblem(http.StatusMethodNotAllowed, kindMethodNotAllowed,
			"Method "+r.Method+" is not allowed here; see the Allow header."), nil)
		return
	}
	s.writeProblem(w, r, newProblem(http.StatusNotFound, kindNotFound, "No such endpoint."), nil)
}

var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed lists the methods the mux routes for r's path.
func (s *server) allowed(r *http.Request) string {
	allow := ""
	for _, m := range probeMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != unmatchedPattern {
			if allow != "" {
				allow += ", "
			}
			allow += m
		}
	}
	return allow
}
