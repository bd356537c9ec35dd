// Package apiclient is a small JSON client of the job board's HTTP API, for
// the programs that drive a running API from outside: `make dev`'s demo and
// its tools (internal/dev/devstack) and the chaos harness's load
// (internal/dev/chaos). It knows the API's conventions (JSON bodies, bearer
// tokens), not its routes.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxAnswer bounds the answer read; the API's largest page is far smaller.
const maxAnswer = 1 << 20

// Client sends requests to the API at BaseURL.
type Client struct {
	// BaseURL is the API's address, such as http://127.0.0.1:8080.
	BaseURL string
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
}

// StatusError is an answer with another status than the one expected.
type StatusError struct {
	Method, Path string
	Got, Want    int
	// Body is the answer's body (a problem document, usually).
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: status %d, want %d: %.300s", e.Method, e.Path, e.Got, e.Want, e.Body)
}

// Do sends method path with in as its JSON body (nil: no body) and token as
// its bearer token (empty: none), and decodes the answer into out (nil, or
// an empty 202 answer: nothing to decode). Errors: the request failed
// (wrapping the *url.Error), a *StatusError when the status is not want, or
// an answer that does not decode.
func (c *Client) Do(ctx context.Context, method, path, token string, in any, want int, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return &StatusError{Method: method, Path: path, Got: resp.StatusCode, Want: want, Body: string(b)}
	}
	if out == nil || (len(b) == 0 && want == http.StatusAccepted) {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// readyWait bounds WaitReady; readyPoll is its pace.
const (
	readyWait = time.Minute
	readyPoll = 100 * time.Millisecond
)

// WaitReady polls the API's /readyz until it answers 200 (the API serves
// and its database answers), for at most a minute. Errors: ctx ended or the
// minute passed first (the error names the URL and carries ctx's cause).
func (c *Client) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	url := c.BaseURL + "/readyz"
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := c.httpClient().Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s did not become ready", url), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}
