package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// writeFunc is the shape of a POST, PATCH or DELETE handler: an apiFunc
// that writes through the Writes of its unit of work, never through the
// server's stores, so that a keyed write's transaction holds every write
// it makes and the unit sees every event it commits.
type writeFunc func(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error

// write wraps the handler of a POST, PATCH or DELETE route: the one way a
// request writes. The handler runs as one unit of work
// (jobboard.WriteStore.Write) against a recorder; then the events that the
// unit committed are relayed, and only then does the client get the
// answer. A request with an Idempotency-Key, on a route whose policy takes
// it (idempotentRequest), has its stored answer replayed if there is one;
// otherwise its unit is keyed: the writes share one transaction, begun at
// the first of them, so that decoding and validation hold none; a success
// (2xx) is stored and committed with them; an error or any other answer
// rolls everything back, stores nothing (a retry runs again) and relays
// nothing. A concurrent request holding the key makes the first write, or
// the commit, fail: 409, or a replay if it has finished meanwhile. Without
// a key, each write commits as it returns, and what committed is relayed
// whatever the handler's outcome.
func (s *server) write(policy keyPolicy, h writeFunc) apiFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, body, replayed, err := s.idempotentRequest(w, r, policy)
		if replayed || err != nil {
			return err
		}
		inner := r
		if req != nil {
			inner = r.WithContext(r.Context()) // a copy, to hand the body read again
			inner.Body = io.NopCloser(bytes.NewReader(body))
		}
		rec := newRecorder()
		var handlerErr error
		events, err := s.Writes.Write(r.Context(), req, func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
			if handlerErr = h(rec, inner, st); handlerErr != nil || req == nil {
				return nil, handlerErr
			}
			return s.storedAnswer(rec, req, policy)
		})
		s.relay(r, events)
		switch {
		case err != nil && req == nil:
			return err
		case err != nil:
			if err != handlerErr { //nolint:errorlint // which error, not which kind
				err = fmt.Errorf("keyed write: %w", err)
			}
			return s.keyConflict(w, r, *req, body, policy, err)
		}
		rec.writeTo(w)
		return nil
	}
}

// relay hands the events that a unit of work committed to the relay, each
// once, when there is a relay: the fast path. A failure only delays an
// event (the sweeper publishes it after its grace period), so it is logged
// and the answer is unchanged. Each publish has its own deadline, detached
// from the client's cancellation (see relayTimeout).
func (s *server) relay(r *http.Request, events []jobboard.Event) {
	if s.Relay == nil {
		return
	}
	for _, ev := range events {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), relayTimeout)
		if err := s.Relay.Relay(ctx, ev); err != nil {
			loggerFrom(r.Context(), s.Logger).WarnContext(ctx, "relay event; the sweeper will publish it",
				slog.String("event_id", ev.EventID), slog.String("type", ev.Type), slog.Int64("application_id", ev.ApplicationID), slog.Any("error", err))
		}
		cancel()
	}
}

// recorder holds a handler's answer until its unit of work has committed
// and its events are relayed.
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
