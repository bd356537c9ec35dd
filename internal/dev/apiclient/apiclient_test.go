package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
)

// request is what the test server saw.
type request struct {
	method, path, contentType, auth, body string
}

func server(t *testing.T, status int, answer string) (*apiclient.Client, chan request) {
	t.Helper()
	seen := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- request{r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return &apiclient.Client{BaseURL: srv.URL, HTTP: srv.Client()}, seen
}

// A request carries its JSON body and bearer token; the answer is decoded.
func TestDoSendsJSONAndDecodes(t *testing.T) {
	t.Parallel()
	c, seen := server(t, http.StatusCreated, `{"id":7}`)
	var out struct {
		ID int64 `json:"id"`
	}
	if err := c.Do(context.Background(), http.MethodPost, "/v1/companies", "tok", map[string]string{"name": "Acme"}, http.StatusCreated, &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != 7 {
		t.Errorf("decoded id = %d, want 7", out.ID)
	}
	r := <-seen
	var in map[string]string
	if r.method != http.MethodPost || r.path != "/v1/companies" || r.contentType != "application/json" || r.auth != "Bearer tok" ||
		json.Unmarshal([]byte(r.body), &in) != nil || in["name"] != "Acme" {
		t.Errorf("server saw %+v", r)
	}
}

// Without a body or a token, neither header is sent.
func TestDoWithoutBodyOrToken(t *testing.T) {
	t.Parallel()
	c, seen := server(t, http.StatusAccepted, "")
	var none struct{}
	if err := c.Do(context.Background(), http.MethodPost, "/v1/auth/resend-verification", "", nil, http.StatusAccepted, &none); err != nil {
		t.Fatalf("an empty 202: %v", err)
	}
	if r := <-seen; r.contentType != "" || r.auth != "" || r.body != "" {
		t.Errorf("server saw %+v; want no body, no Content-Type, no Authorization", r)
	}
}

// Another status is a *StatusError that carries the answer.
func TestDoUnexpectedStatus(t *testing.T) {
	t.Parallel()
	c, _ := server(t, http.StatusConflict, `{"title":"Conflict"}`)
	err := c.Do(context.Background(), http.MethodPatch, "/v1/applications/1", "tok", map[string]string{"status": "offer"}, http.StatusOK, nil)
	var se *apiclient.StatusError
	if !errors.As(err, &se) || se.Got != http.StatusConflict || se.Want != http.StatusOK || !strings.Contains(se.Body, "Conflict") ||
		!strings.Contains(err.Error(), "PATCH /v1/applications/1") {
		t.Errorf("err = %v; want a StatusError 409 (want 200) with the body", err)
	}
}

// An answer that is not the JSON expected is an error, not a zero value.
func TestDoUndecodableAnswer(t *testing.T) {
	t.Parallel()
	c, _ := server(t, http.StatusOK, `not json`)
	var out struct{}
	if err := c.Do(context.Background(), http.MethodGet, "/v1/me", "tok", nil, http.StatusOK, &out); err == nil || !strings.Contains(err.Error(), "decode") {
		t.Errorf("err = %v; want a decode error", err)
	}
}

// A request that gets no answer names itself and keeps the *url.Error.
func TestDoTransportError(t *testing.T) {
	t.Parallel()
	c, _ := server(t, http.StatusOK, "")
	c.BaseURL = "http://127.0.0.1:1"
	err := c.Do(context.Background(), http.MethodGet, "/v1/jobs", "", nil, http.StatusOK, nil)
	var ue *url.Error
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "GET /v1/jobs") {
		t.Errorf("err = %v; want a *url.Error named by the request", err)
	}
}

// WaitReady returns once /readyz answers 200, not before.
func TestWaitReadyWaitsFor200(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || asked.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	c := &apiclient.Client{BaseURL: srv.URL, HTTP: srv.Client()}
	if err := c.WaitReady(context.Background()); err != nil || asked.Load() != 3 {
		t.Errorf("WaitReady = %v after %d requests; want nil after the third", err, asked.Load())
	}
}

// An API that never gets ready fails the wait when ctx ends.
func TestWaitReadyGivesUpWithTheContext(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := (&apiclient.Client{BaseURL: srv.URL, HTTP: srv.Client()}).WaitReady(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), srv.URL+"/readyz") {
		t.Errorf("WaitReady = %v; want the URL named and the deadline", err)
	}
}
