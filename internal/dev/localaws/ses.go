package localaws

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// Email is one email the SES stand-in accepted, as GET /store lists it.
type Email struct {
	MessageID   string      `json:"messageId"`
	From        string      `json:"from"`
	Destination Destination `json:"destination"`
	Subject     string      `json:"subject"`
	Body        EmailBody   `json:"body"`
	// Headers are the custom headers the email was sent with.
	Headers []Header `json:"headers"`
	// At is when it was accepted, in Unix seconds.
	At int64 `json:"at"`
}

// Header is one custom message header.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Header returns the value of the email's custom header name (compared
// case-insensitively), or "".
func (e Email) Header(name string) string {
	for _, h := range e.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// Destination lists an email's recipients.
type Destination struct {
	To  []string `json:"to"`
	CC  []string `json:"cc"`
	BCC []string `json:"bcc"`
}

// EmailBody is an email's content; either part may be empty.
type EmailBody struct {
	HTML string `json:"html"`
	Text string `json:"text"`
}

// Emails returns every email the SES stand-in at endpoint has accepted,
// oldest first. Errors: the request failed or answered other than 200.
func Emails(ctx context.Context, endpoint string) ([]Email, error) {
	var store struct {
		Emails []Email `json:"emails"`
	}
	body, err := sesStoreRequest(ctx, http.MethodGet, endpoint+"/store")
	if err != nil {
		return nil, fmt.Errorf("list emails: %w", err)
	}
	if err := json.Unmarshal(body, &store); err != nil {
		return nil, fmt.Errorf("list emails: decode store: %w", err)
	}
	return store.Emails, nil
}

// EmailsTo returns the emails with to among their To addresses, so that
// tests sharing one stand-in each see only their own (give each test its
// own recipient). Errors as for Emails.
func EmailsTo(ctx context.Context, endpoint, to string) ([]Email, error) {
	all, err := Emails(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	var mine []Email
	for _, e := range all {
		if slices.ContainsFunc(e.Destination.To, func(a string) bool { return strings.EqualFold(a, to) }) {
			mine = append(mine, e)
		}
	}
	return mine, nil
}

// ClearEmails empties the SES stand-in's store. Tests that share a stand-in
// should filter with EmailsTo instead.
func ClearEmails(ctx context.Context, endpoint string) error {
	if _, err := sesStoreRequest(ctx, http.MethodPost, endpoint+"/clear-store"); err != nil {
		return fmt.Errorf("clear emails: %w", err)
	}
	return nil
}

func sesStoreRequest(ctx context.Context, method, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: status %d: %.200s", method, url, resp.StatusCode, body)
	}
	return body, nil
}
