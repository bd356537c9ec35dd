package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	idempotencyRetryAfter = "1"
)

// replayedHeaders are the header fields of an answer that are stored and
// replayed; the rest (Content-Length, X-Request-Id, Cache-Control, …) are
// made afresh for every answer.
var replayedHeaders = []string{"Content-Type", "Location", "ETag"}

// keyPolicy says how a POST or PATCH route treats Idempotency-Key.
type keyPolicy int

const (
	// keysPerUser: the default. Keys are scoped to the signed-in user, as
	// Stripe scopes them to the account; a request without valid
	// credentials is left to the handler (401).
	keysPerUser keyPolicy = iota
	// keysIgnored: registration and login. Their callers are not signed in,
	// so a key could be scoped by nothing the server knows of them: one
	// anonymous scope made a stranger's key, once guessed or seen, a way to
	// replay the registration (a fresh token for the victim) and to test
	// passwords against its fingerprint. A retry needs no key anyway: a
	// repeated registration answers 409 email-taken, after which the
	// client logs in; a repeated login signs in again. The key is checked
	// (400 when malformed) and otherwise ignored. See docs/api.md.
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

// writeFunc is the shape of a POST or PATCH handler: an apiFunc that
// writes through the Writes it is given, never through the server's
// stores, so that a keyed write's transaction holds every write it makes.
type writeFunc func(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error

// noWrites is a writeFunc for a handler that makes none of Writes' writes
// (registration, login, the password reset: their keys are ignored).
func noWrites(h apiFunc) writeFunc {
	return func(w http.ResponseWriter, r *http.Request, _ jobboard.Writes) error { return h(w, r) }
}

// keyed wraps the handler of a POST or PATCH route with Idempotency-Key.
// Without the header the handler runs as it would anyway, with the store's
// own Writes. With it:
//
//  1. The key is checked (400) and scoped to the caller.
//  2. An answer stored under the key is replayed (Idempotent-Replayed:
//     true) if the request has the same fingerprint (a keyed MAC of it,
//     see fingerprint.go), else refused (422).
//  3. Otherwise the handler runs against a recorder, with the Writes of a
//     keyed write (IdempotencyStore.KeyedWrite): they share one
//     transaction, begun at the first write, so that decoding and
//     validation hold no transaction. A concurrent request holding the key
//     makes that first write fail: 409 (or a replay, if it has finished
//     meanwhile).
//  4. A success (2xx) is stored and committed with the writes, then the
//     work waiting for the commit (the event relay) runs, then the client
//     gets the answer. An error rolls everything back and stores nothing:
//     nothing was written, so a retry runs again.
func (s *server) keyed(policy keyPolicy, h writeFunc) apiFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		key, ok, err := parseIdempotencyKey(r.Header)
		if err != nil {
			return err
		}
		if !ok || policy == keysIgnored {
			return h(w, r, s.writes)
		}
		a, signedIn, err := s.optionalActor(r)
		if err != nil || !signedIn {
			return h(w, r, s.writes) // the handler answers 401
		}
		scope := "user:" + strconv.FormatInt(a.UserID, 10)
		if s.idempotency == nil {
			return errors.New("an Idempotency-Key arrived but no idempotency store is configured")
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			return fmt.Errorf("read body: %w", err) // 413 when too large
		}
		fp, err := s.fingerprints.sum(r.Context(), scope, r, body)
		if err != nil {
			return err
		}
		req := jobboard.IdempotentRequest{Scope: scope, Key: key, Fingerprint: fp}
		if replayed, err := s.replay(w, r, req, body, policy); replayed || err != nil {
			return err
		}

		hooks := &afterCommitHooks{}
		inner := r.WithContext(context.WithValue(r.Context(), afterCommitKey{}, hooks))
		inner.Body = io.NopCloser(bytes.NewReader(body))
		rec := newRecorder()
		var committed bool
		var handlerErr error
		err = s.idempotency.KeyedWrite(r.Context(), req, func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
			if handlerErr = h(rec, inner, st); handlerErr != nil {
				return nil, handlerErr
			}
			if rec.status < 200 || rec.status > 299 {
				return nil, nil // rolled back; the answer is sent as it is
			}
			answer := rec.answer(req.Fingerprint)
			if policy == keysSecretAnswer {
				if answer.Body, err = s.sealSecretAnswer(answer.Body); err != nil {
					return nil, err
				}
			}
			committed = true
			return &answer, nil
		})
		if err != nil && err != handlerErr { //nolint:errorlint // which error, not which kind
			err = fmt.Errorf("keyed write: %w", err)
		}
		if err != nil {
			return s.keyConflict(w, r, req, body, policy, err)
		}
		if committed {
			hooks.run()
		}
		rec.writeTo(w)
		return nil
	}
}

// keyConflict answers an error of a keyed write. When the key was taken by
// a concurrent request, that request's answer is replayed if it has been
// stored meanwhile; otherwise the error stands (409 with Retry-After).
func (s *server) keyConflict(w http.ResponseWriter, r *http.Request, req jobboard.IdempotentRequest, body []byte, policy keyPolicy, err error) error {
	if !errors.Is(err, jobboard.ErrIdempotencyKeyInUse) {
		return err
	}
	if replayed, rerr := s.replay(w, r, req, body, policy); replayed || rerr != nil {
		return rerr
	}
	w.Header().Set("Retry-After", idempotencyRetryAfter)
	return err
}

// replay writes the answer stored under req's key, when there is one for
// the same request (body is the request's; policy the route's, which says
// whether the stored answer holds a sealed secret). Errors: errKeyReused
// for another request, the store's and the key source's errors.
func (s *server) replay(w http.ResponseWriter, r *http.Request, req jobboard.IdempotentRequest, body []byte, policy keyPolicy) (bool, error) {
	stored, err := s.idempotency.StoredResponse(r.Context(), req.Scope, req.Key)
	switch {
	case errors.Is(err, jobboard.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up idempotency key: %w", err)
	}
	same, err := s.fingerprints.matches(r.Context(), stored.Fingerprint, req.Scope, r, body)
	switch {
	case errors.Is(err, errUnknownFingerprintKey):
		// Cannot be told; refusing is safe (nothing runs twice), and the
		// client makes a new key for a new request.
		loggerFrom(r.Context(), s.log).WarnContext(r.Context(), "Idempotency-Key retry refused: its answer was stored under a retired key",
			slog.Any("err", err))
		return false, errKeyReused
	case err != nil:
		return false, err
	case !same:
		return false, errKeyReused
	}
	if policy == keysSecretAnswer {
		if stored.Body, err = s.openSecretAnswer(stored.Body); err != nil {
			return false, fmt.Errorf("replay: %w", err)
		}
	}
	h := w.Header()
	h.Set(idempotentReplayed, "true")
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

// answer is what is stored of the recorded answer.
func (rec *recorder) answer(fp []byte) jobboard.StoredResponse {
	a := jobboard.StoredResponse{Fingerprint: fp, Status: rec.status, Header: map[string]string{}, Body: rec.body.Bytes()}
	for _, name := range replayedHeaders {
		if v := rec.header.Get(name); v != "" {
			a.Header[name] = v
		}
	}
	return a
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
