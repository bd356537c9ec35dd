package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Header fields of keyed writes (the IETF httpapi draft "The Idempotency-Key
// HTTP Header Field", with Stripe's replay marker).
const (
	idempotencyKeyHeader  = "Idempotency-Key"
	idempotentReplayed    = "Idempotent-Replayed"
	minIdempotencyKeyLen  = 16
	maxIdempotencyKeyLen  = 255
	anonymousKeyScope     = "anonymous"
	idempotencyRetryAfter = "1"
)

// replayedHeaders are the header fields of an answer that are stored and
// replayed; the rest (Content-Length, X-Request-Id, Cache-Control, …) are
// made afresh for every answer.
var replayedHeaders = []string{"Content-Type", "Location", "ETag"}

// keyPolicy says how a POST or PATCH route treats Idempotency-Key.
type keyPolicy int

const (
	// keysPerUser: the default. Keys are scoped to the signed-in user; a
	// request without valid credentials is left to the handler (401).
	keysPerUser keyPolicy = iota
	// keysAnonymousSession: registration. Keys are scoped by themselves
	// (there is no user yet), and the answer is a session: its bearer token
	// is not stored (no credentials at rest); a replay gets a fresh token
	// for the stored user.
	keysAnonymousSession
	// keysIgnored: login changes nothing, so a retry is harmless as it is,
	// and its answer (a token) is not worth storing. The key is checked and
	// otherwise ignored.
	keysIgnored
	// keysSecretAnswer: keys per user, for an answer that shows a webhook
	// signing secret: it is stored with the secret sealed (webhook.go).
	keysSecretAnswer
)

// errKeyReused answers a key sent again with a different request.
var errKeyReused = &statusError{http.StatusUnprocessableEntity, kindIdempotencyKeyReused,
	"This Idempotency-Key was used with a different request (method, path, If-Match or body); use a new key for a new request."}

// parseIdempotencyKey reads the Idempotency-Key header: absent (false), or
// one key of 16 to 255 characters from A-Z a-z 0-9 and - _ . : ~ + / =,
// bare or as a structured-field string ("…"), as the draft writes it.
// Errors: *requestError.
func parseIdempotencyKey(h http.Header) (string, bool, error) {
	values := h.Values(idempotencyKeyHeader)
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", false, badRequest(idempotencyKeyHeader, "must be sent once")
	}
	key := strings.TrimSpace(values[0])
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if len(key) < minIdempotencyKeyLen || len(key) > maxIdempotencyKeyLen || strings.IndexFunc(key, notKeyRune) >= 0 {
		return "", false, badRequest(idempotencyKeyHeader, fmt.Sprintf(
			"must be %d to %d characters from A-Z a-z 0-9 - _ . : ~ + / = (a UUID, for instance)",
			minIdempotencyKeyLen, maxIdempotencyKeyLen))
	}
	return key, true, nil
}

func notKeyRune(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("-_.:~+/=", r)
}

// fingerprint identifies what a retry must repeat: method, path, query,
// If-Match (a conditional change differs from an unconditional one) and
// the body, byte for byte.
func fingerprint(r *http.Request, body []byte) []byte {
	h := sha256.New()
	for _, part := range []string{r.Method, r.URL.Path, r.URL.RawQuery, strings.Join(r.Header.Values("If-Match"), ",")} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(body)
	return h.Sum(nil)
}

// keyed wraps the handler of a POST or PATCH route with Idempotency-Key.
// Without the header the handler runs as it would anyway. With it:
//
//  1. The key is checked (400) and scoped to the caller.
//  2. An answer stored under the key is replayed (Idempotent-Replayed:
//     true) if the request has the same fingerprint, else refused (422).
//  3. Otherwise the handler runs against a recorder, with a context in
//     which the stores' writes share one transaction, begun at the first
//     write: decoding, validation and the password hash of a registration
//     hold no transaction. A concurrent request holding the key makes that
//     first write fail: 409 (or a replay, if it has finished meanwhile).
//  4. A success (2xx) is stored and committed with the writes, then the
//     work waiting for the commit (the event relay) runs, then the client
//     gets the answer. An error rolls everything back and stores nothing:
//     nothing was written, so a retry runs again.
func (s *server) keyed(policy keyPolicy, h apiFunc) apiFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		key, ok, err := parseIdempotencyKey(r.Header)
		if err != nil {
			return err
		}
		if !ok || policy == keysIgnored {
			return h(w, r)
		}
		scope := anonymousKeyScope
		if policy == keysPerUser || policy == keysSecretAnswer {
			a, signedIn, err := s.optionalActor(r)
			if err != nil || !signedIn {
				return h(w, r) // the handler answers 401
			}
			scope = "user:" + strconv.FormatInt(a.UserID, 10)
		}
		if s.idempotency == nil {
			return errors.New("an Idempotency-Key arrived but no idempotency store is configured")
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			return fmt.Errorf("read body: %w", err) // 413 when too large
		}
		req := jobboard.IdempotentRequest{Scope: scope, Key: key, Fingerprint: fingerprint(r, body)}
		if replayed, err := s.replay(w, r, req, policy); replayed || err != nil {
			return err
		}

		ctx, write := s.idempotency.BeginIdempotent(r.Context(), req)
		defer write.Rollback(ctx)
		hooks := &afterCommitHooks{}
		ctx = context.WithValue(ctx, afterCommitKey{}, hooks)
		inner := r.WithContext(ctx)
		inner.Body = io.NopCloser(bytes.NewReader(body))
		rec := newRecorder()
		if err := h(rec, inner); err != nil {
			write.Rollback(ctx)
			return s.keyConflict(w, r, req, policy, err)
		}
		if rec.status < 200 || rec.status > 299 {
			write.Rollback(ctx)
			rec.writeTo(w)
			return nil
		}
		answer, err := rec.answer(req.Fingerprint, policy)
		if err == nil && policy == keysSecretAnswer {
			answer.Body, err = s.sealSecretAnswer(answer.Body)
		}
		if err != nil {
			return err
		}
		if err := write.Commit(ctx, answer); err != nil {
			return s.keyConflict(w, r, req, policy, fmt.Errorf("keyed write: %w", err))
		}
		hooks.run()
		rec.writeTo(w)
		return nil
	}
}

// keyConflict answers an error of a keyed write. When the key was taken by
// a concurrent request, that request's answer is replayed if it has been
// stored meanwhile; otherwise the error stands (409 with Retry-After).
func (s *server) keyConflict(w http.ResponseWriter, r *http.Request, req jobboard.IdempotentRequest, policy keyPolicy, err error) error {
	if !errors.Is(err, jobboard.ErrIdempotencyKeyInUse) {
		return err
	}
	if replayed, rerr := s.replay(w, r, req, policy); replayed || rerr != nil {
		return rerr
	}
	w.Header().Set("Retry-After", idempotencyRetryAfter)
	return err
}

// replay writes the answer stored under req's key, when there is one for
// the same fingerprint. Errors: errKeyReused for another fingerprint, the
// store's errors.
func (s *server) replay(w http.ResponseWriter, r *http.Request, req jobboard.IdempotentRequest, policy keyPolicy) (bool, error) {
	stored, err := s.idempotency.StoredResponse(r.Context(), req.Scope, req.Key)
	switch {
	case errors.Is(err, jobboard.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up idempotency key: %w", err)
	case !bytes.Equal(stored.Fingerprint, req.Fingerprint):
		return false, errKeyReused
	}
	h := w.Header()
	h.Set(idempotentReplayed, "true")
	if policy == keysAnonymousSession {
		var sealed struct {
			User jobboard.User `json:"user"`
		}
		if err := json.Unmarshal(stored.Body, &sealed); err != nil {
			return false, fmt.Errorf("replay session: %w", err)
		}
		return true, s.writeSession(w, r, stored.Status, sealed.User)
	}
	if policy == keysSecretAnswer {
		if stored.Body, err = s.openSecretAnswer(stored.Body); err != nil {
			return false, fmt.Errorf("replay: %w", err)
		}
	}
	for name, value := range stored.Header {
		h.Set(name, value)
	}
	h.Set("Content-Length", strconv.Itoa(len(stored.Body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(stored.Status)
	_, _ = w.Write(stored.Body) // the client went away; nothing to do
	return true, nil
}

// recorder holds a handler's answer until its keyed write has committed.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.body.Write(b)
}

// writeTo sends the recorded answer.
func (rec *recorder) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for name, values := range rec.header {
		h[name] = values
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes()) // the client went away; nothing to do
}

// answer is what is stored of the recorded answer. A session keeps only its
// user: the token is issued afresh on replay.
func (rec *recorder) answer(fp []byte, policy keyPolicy) (jobboard.StoredResponse, error) {
	a := jobboard.StoredResponse{Fingerprint: fp, Status: rec.status, Header: map[string]string{}, Body: rec.body.Bytes()}
	for _, name := range replayedHeaders {
		if v := rec.header.Get(name); v != "" {
			a.Header[name] = v
		}
	}
	if policy == keysAnonymousSession {
		var sealed struct {
			User json.RawMessage `json:"user"`
		}
		if err := json.Unmarshal(a.Body, &sealed); err != nil {
			return a, fmt.Errorf("store session answer: %w", err)
		}
		if len(sealed.User) == 0 {
			return a, fmt.Errorf("store session answer: no user in %q", a.Body)
		}
		body, err := json.Marshal(sealed)
		if err != nil {
			return a, fmt.Errorf("store session answer: %w", err)
		}
		a.Body = body
	}
	return a, nil
}

// afterCommitKey is the context key of the work waiting for a keyed write's
// commit.
type afterCommitKey struct{}

// afterCommitHooks is the work a handler wants done only once its writes
// are committed: publishing an event that a rollback would have undone.
type afterCommitHooks struct {
	fns []func()
}

func (h *afterCommitHooks) run() {
	for _, fn := range h.fns {
		fn()
	}
}

// afterCommit runs fn once the request's writes are committed: at once when
// they committed on their own, after the keyed write's commit otherwise
// (never, when it rolls back).
func afterCommit(r *http.Request, fn func()) {
	if hooks, ok := r.Context().Value(afterCommitKey{}).(*afterCommitHooks); ok {
		hooks.fns = append(hooks.fns, fn)
		return
	}
	fn()
}
