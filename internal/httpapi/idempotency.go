package httpapi

import (
	"errors"
	"fmt"
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

// keyPolicy says how a POST, PATCH or DELETE route treats Idempotency-Key.
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
	// keysNone: DELETE, idempotent by its method (a repeat finds nothing
	// and answers 404, changing nothing): the header is not read.
	keysNone
)

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

// idempotentRequest reads what makes a write keyed, as policy takes it:
// without a key, or on a route that ignores keys, nil (so is it for a
// caller not signed in: the handler answers 401). With one, the key is
// checked (400) and scoped to the caller, and the body read (it is part of
// the request's fingerprint); an answer stored under the key is replayed
// if the request has the same fingerprint (a keyed MAC of it, see
// fingerprint.go), else refused (422): replayed then says the request is
// answered. Errors: *requestError, errKeyReused, the body's, the stores'.
func (s *server) idempotentRequest(w http.ResponseWriter, r *http.Request, policy keyPolicy) (req *jobboard.IdempotentRequest, body []byte, replayed bool, err error) {
	if policy == keysNone {
		return nil, nil, false, nil
	}
	key, ok, err := parseIdempotencyKey(r.Header)
	if err != nil || !ok || policy == keysIgnored {
		return nil, nil, false, err
	}
	a, signedIn := s.optionalActor(r)
	if !signedIn {
		return nil, nil, false, nil // a route with no one signed in: its keys are scoped by nothing
	}
	scope := "user:" + strconv.FormatInt(a.UserID, 10)
	if body, err = readAll(w, r); err != nil {
		return nil, nil, false, err
	}
	fp, err := s.fingerprints.sum(r.Context(), scope, r, body)
	if err != nil {
		return nil, nil, false, err
	}
	req = &jobboard.IdempotentRequest{Scope: scope, Key: key, Fingerprint: fp}
	replayed, err = s.replay(w, r, *req, body, policy)
	return req, body, replayed, err
}

// storedAnswer is what a keyed write stores of its handler's answer: a
// success (2xx), with the secret it shows sealed (keysSecretAnswer); nil,
// and so a rollback, for any other answer.
func (s *server) storedAnswer(rec *recorder, req *jobboard.IdempotentRequest, policy keyPolicy) (*jobboard.StoredResponse, error) {
	if rec.status < 200 || rec.status > 299 {
		return nil, nil // rolled back; the answer is sent as it is
	}
	answer := rec.answer(req.Fingerprint)
	if policy == keysSecretAnswer {
		var err error
		if answer.Body, err = s.sealSecretAnswer(answer.Body); err != nil {
			return nil, err
		}
	}
	return &answer, nil
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
	stored, err := s.Writes.StoredResponse(r.Context(), req.Scope, req.Key)
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
		loggerFrom(r.Context(), s.Logger).WarnContext(r.Context(), "Idempotency-Key retry refused: its answer was stored under a retired key",
			slog.Any("error", err))
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
