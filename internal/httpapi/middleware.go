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
	if s.requestID != nil {
		if id := s.requestID(r); id != "" {
			return id
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// observe is the outermost middleware: it assigns the request id, puts it
// into the context (for loggerFrom and problems), recovers panics and
// writes one access log line per request.
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
				loggerFrom(ctx, s.log).ErrorContext(ctx, "panic in handler", slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				if !rec.wroteHeader {
					p, _ := problemFor(errPanic)
					s.writeProblem(rec, r, p, errPanic)
				}
			}
			pattern := r.Pattern
			if pattern == "" {
				pattern = "unmatched"
			}
			level := slog.LevelInfo
			switch {
			case rec.status == http.StatusServiceUnavailable:
				level = slog.LevelWarn // overload or an outage, not a bug: logged where it starts
			case rec.status >= 500:
				level = slog.LevelError
			}
			s.log.LogAttrs(ctx, level, "request",
				slog.String("request_id", id),
				slog.String("method", r.Method),
				slog.String("pattern", pattern),
				slog.Int("status", rec.status),
				slog.Int64("bytes", rec.bytes),
				slog.Duration("duration", time.Since(start)),
			)
			s.countRequest(rec.status)
		}()
		next.ServeHTTP(rec, r)
	})
}

// countRequest writes the request's metric line (Config.Metrics).
func (s *server) countRequest(status int) {
	if s.metrics == nil {
		return
	}
	serverErrors := 0.0
	if status >= 500 {
		serverErrors = 1
	}
	emf.WriteByVersion(s.metrics, "api", s.version, s.now(),
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

// route dispatches to the mux, answering unmatched paths with a 404 problem
// and known paths with a wrong method with a 405 problem and Allow, instead of
// the mux's plain-text answers.
func (s *server) route(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	if allow := s.allowed(r); allow != "" {
		w.Header().Set("Allow", allow)
		s.writeError(w, r, &statusError{http.StatusMethodNotAllowed, kindMethodNotAllowed,
			"Method " + r.Method + " is not allowed here; see the Allow header."})
		return
	}
	s.writeError(w, r, &statusError{http.StatusNotFound, kindNotFound, "No such endpoint."})
}

var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed lists the methods the mux routes for r's path.
func (s *server) allowed(r *http.Request) string {
	allow := ""
	for _, m := range probeMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			if allow != "" {
				allow += ", "
			}
			allow += m
		}
	}
	return allow
}
