package jobboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Webhooks: a company's members register HTTPS endpoints; the events they
// subscribe to are delivered there, signed as the Standard Webhooks
// specification says (webhook-id, webhook-timestamp, webhook-signature),
// at least once, retried for days. docs/webhooks.md is the reference for
// receivers; docs/design.md has the pipeline.

// The event types an endpoint can subscribe to: the "type" of the body a
// receiver gets. A withdrawal is a status change too: it sends both
// application.status_changed and application.withdrawn.
const (
	WebhookApplicationSubmitted     = "application.submitted"
	WebhookApplicationStatusChanged = EventTypeStatusChanged
	WebhookApplicationWithdrawn     = "application.withdrawn"
	WebhookJobClosed                = "job.closed"
	// WebhookPing is the test event of POST …/webhooks/{wid}/ping: sent to
	// that endpoint only, whatever it subscribes to.
	WebhookPing = "webhook.ping"
)

// WebhookEventTypes lists the subscribable types, in the order the API
// documents them.
var WebhookEventTypes = []string{
	WebhookApplicationSubmitted, WebhookApplicationStatusChanged,
	WebhookApplicationWithdrawn, WebhookJobClosed,
}

// Limits on webhook endpoints (how many a company may have:
// MaxWebhookEndpoints, limits.go).
const (
	// MaxWebhookURLLen bounds an endpoint's URL, in bytes.
	MaxWebhookURLLen = 2000
	// MaxWebhookDescriptionLen bounds its description, in characters.
	MaxWebhookDescriptionLen = 500
	// DefaultSecretOverlap is how long the previous signing secret keeps
	// signing after a rotation when the request does not say.
	DefaultSecretOverlap = 24 * time.Hour
	// MaxSecretOverlap is the longest overlap a rotation may ask for.
	MaxSecretOverlap = 7 * 24 * time.Hour
)

// The reasons an endpoint is disabled (WebhookEndpoint.DisabledReason).
const (
	// DisabledByMember: a member set enabled to false.
	DisabledByMember = "disabled_by_member"
	// DisabledGone: the endpoint answered 410 Gone.
	DisabledGone = "gone"
	// DisabledFailing: every attempt failed for WebhookDisableAfter.
	DisabledFailing = "failing"
)

// WebhookDisableAfter is how long an endpoint may fail every attempt before
// it is disabled and its company's members are emailed: the retry window of
// one delivery, so that the first delivery that failed throughout has had
// all its retries.
const WebhookDisableAfter = WebhookRetryWindow

// WebhookRetryWindow is how long a delivery is retried after it was
// dispatched (or replayed) before it is given up as failed.
const WebhookRetryWindow = 72 * time.Hour

// WebhookEndpoint is an HTTPS endpoint of a company that receives the
// events it subscribes to. Its signing secret is never part of it: the API
// shows a secret once, when it is made (WebhookSecretReveal).
type WebhookEndpoint struct {
	ID          int64    `json:"id"`
	CompanyID   int64    `json:"company_id"`
	URL         string   `json:"url"`
	Description string   `json:"description"`
	EventTypes  []string `json:"event_types"`
	Enabled     bool     `json:"enabled"`
	// DisabledReason says why a disabled endpoint is: DisabledByMember,
	// DisabledGone or DisabledFailing; empty when enabled.
	DisabledReason string     `json:"disabled_reason,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	// FailingSince is the first failed attempt since the last success; nil
	// while the endpoint is healthy.
	FailingSince *time.Time `json:"failing_since,omitempty"`
	// PreviousSecretExpiresAt is, during a rotation's overlap, when the
	// previous secret stops signing.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
}

// NewWebhookEndpoint is the input of POST /v1/companies/{id}/webhooks.
type NewWebhookEndpoint struct {
	URL         string   `json:"url"`
	Description string   `json:"description"`
	EventTypes  []string `json:"event_types"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled"`
}

// Normalize trims the URL and description and sorts the event types.
func (n *NewWebhookEndpoint) Normalize() {
	n.URL = strings.TrimSpace(n.URL)
	n.Description = strings.TrimSpace(n.Description)
	n.EventTypes = normalizeTypes(n.EventTypes)
}

// Validate returns a *ValidationError naming every invalid field. The URL's
// shape is checked here; WebhookURLPolicy.Check applies the deployment's
// rules (https on 443, no internal addresses).
func (n NewWebhookEndpoint) Validate() error {
	p := problems{}
	checkWebhookURL(p, n.URL)
	checkDescription(p, n.Description)
	checkEventTypes(p, n.EventTypes)
	return p.err()
}

// WebhookEndpointPatch is the input of PATCH …/webhooks/{wid}: the members
// given change, the rest stay.
type WebhookEndpointPatch struct {
	URL         *string   `json:"url"`
	Description *string   `json:"description"`
	EventTypes  *[]string `json:"event_types"`
	Enabled     *bool     `json:"enabled"`
}

// Normalize trims and sorts like NewWebhookEndpoint's.
func (p *WebhookEndpointPatch) Normalize() {
	if p.URL != nil {
		*p.URL = strings.TrimSpace(*p.URL)
	}
	if p.Description != nil {
		*p.Description = strings.TrimSpace(*p.Description)
	}
	if p.EventTypes != nil {
		*p.EventTypes = normalizeTypes(*p.EventTypes)
	}
}

// Validate returns a *ValidationError naming every invalid member; a patch
// that changes nothing is invalid too.
func (p WebhookEndpointPatch) Validate() error {
	probs := problems{}
	if p.URL == nil && p.Description == nil && p.EventTypes == nil && p.Enabled == nil {
		probs.add("body", "must change at least one of url, description, event_types, enabled")
	}
	if p.URL != nil {
		checkWebhookURL(probs, *p.URL)
	}
	if p.Description != nil {
		checkDescription(probs, *p.Description)
	}
	if p.EventTypes != nil {
		checkEventTypes(probs, *p.EventTypes)
	}
	return probs.err()
}

func normalizeTypes(types []string) []string {
	out := make([]string, 0, len(types))
	for _, t := range types {
		out = append(out, strings.TrimSpace(t))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func checkDescription(p problems, d string) {
	if utf8.RuneCountInString(d) > MaxWebhookDescriptionLen {
		p.add("description", "must be at most %d characters", MaxWebhookDescriptionLen)
	}
}

func checkEventTypes(p problems, types []string) {
	if len(types) == 0 {
		p.add("event_types", "must name at least one of %s", strings.Join(WebhookEventTypes, ", "))
		return
	}
	for _, t := range types {
		if !slices.Contains(WebhookEventTypes, t) {
			p.add("event_types", "must name only %s", strings.Join(WebhookEventTypes, ", "))
			return
		}
	}
}

// checkWebhookURL checks the shape every endpoint URL must have, whatever
// the deployment allows: an absolute http(s) URL with a host, without user
// information or a fragment, of printable ASCII.
func checkWebhookURL(p problems, raw string) {
	if raw == "" {
		p.add("url", "is required")
		return
	}
	if len(raw) > MaxWebhookURLLen {
		p.add("url", "must be at most %d bytes", MaxWebhookURLLen)
		return
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] <= ' ' || raw[i] >= 0x7f {
			p.add("url", "must be printable ASCII without spaces (percent-encode the rest)")
			return
		}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.add("url", "is not a valid URL")
	case u.Scheme != "https" && u.Scheme != "http":
		p.add("url", "must be an https URL")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		p.add("url", "must be an absolute URL with a host")
	case u.User != nil:
		p.add("url", "must not carry a user name or password")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		p.add("url", "must not have a fragment")
	case emptyLabel(u.Hostname()):
		p.add("url", "must have a host name without an empty label (only one dot may end it)")
	}
}

// emptyLabel reports whether a host that is not an IPv6 literal has an
// empty label: "localhost..", "a..b", ".a". Such a name is not the one the
// checks of WebhookURLPolicy see ("localhost.." is not "localhost"), and a
// resolver may read it as that name all the same. One dot may end a name
// (the root), "hooks.example.com.".
func emptyLabel(host string) bool {
	if strings.Contains(host, ":") {
		return false // an IPv6 literal (url.URL.Hostname drops its brackets)
	}
	return slices.Contains(strings.Split(strings.TrimSuffix(host, "."), "."), "")
}

// WebhookURLPolicy is what a deployment allows as an endpoint URL, checked
// when an endpoint is created or changed (the delivery function checks the
// addresses again when it connects: a name may resolve elsewhere later).
type WebhookURLPolicy struct {
	// AllowInsecure also allows http, any port and loopback addresses,
	// for local development and tests (WEBHOOK_ALLOW_INSECURE). Never on
	// in a deployment: private, link-local, metadata and the other
	// internal ranges stay refused even then.
	AllowInsecure bool
}

// Check applies the policy to a URL of the shape Validate accepts: https
// on port 443 (unless AllowInsecure), and a host that is not an internal
// address given literally, nor a name that can only be local (localhost,
// *.localhost, *.local, *.internal). Errors: a *ValidationError on "url".
func (pol WebhookURLPolicy) Check(raw string) error {
	p := problems{}
	checkWebhookURL(p, raw)
	if err := p.err(); err != nil {
		return err
	}
	u, _ := url.Parse(raw) // checked above
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	port := u.Port()
	switch {
	case !pol.AllowInsecure && u.Scheme != "https":
		p.add("url", "must be an https URL")
	case !pol.AllowInsecure && port != "" && port != "443":
		p.add("url", "must use port 443 (the default of https)")
	case port != "" && !validPort(port):
		p.add("url", "has an invalid port")
	}
	addr, isAddr := parseHostAddr(host)
	switch {
	case isAddr:
		if reason, blocked := BlockedWebhookAddr(addr, pol.AllowInsecure); blocked {
			p.add("url", "must not point to %s", reason)
		}
	case numericName(host):
		// 2852039166, 0251.0376.0251.0376, 0xa9.0xfe…: not DNS names, and
		// some resolvers read them as addresses (inet_aton's forms).
		p.add("url", "must have a DNS name or an IP address written the standard way")
	case localName(host) && !pol.AllowInsecure:
		p.add("url", "must not name a local host")
	}
	return p.err()
}

// numericName reports whether a host that is not a standard IP address has
// a last label of digits (or 0x and hex digits): no top-level domain looks
// like that, and inet_aton reads such names as IPv4 addresses.
func numericName(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	digits := strings.TrimPrefix(strings.TrimPrefix(last, "0x"), "0X")
	if digits == "" {
		return true
	}
	return strings.Trim(digits, "0123456789abcdefABCDEF") == "" &&
		(digits != last || strings.Trim(last, "0123456789") == "")
}

func validPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n < 65536 && port[0] != '0'
}

// localName reports whether a host name can only mean this machine or its
// network.
func localName(host string) bool {
	if host == "localhost" {
		return true
	}
	for _, suffix := range []string{".localhost", ".local", ".internal", ".localdomain", ".home.arpa"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}

// Secrets. A signing secret is "whsec_" and the base64 of 32 random bytes,
// as Standard Webhooks writes them; receivers HMAC with the decoded bytes.
const (
	webhookSecretPrefix = "whsec_"
	webhookSecretBytes  = 32
)

// NewWebhookSecret returns a fresh signing secret, "whsec_…".
func NewWebhookSecret() string {
	b := make([]byte, webhookSecretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand panics on a broken source)
	return webhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// WebhookSecretKey returns the HMAC key of a secret: the bytes its base64
// encodes. Errors: ErrWebhookSecretMalformed.
func WebhookSecretKey(secret string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, webhookSecretPrefix))
	if err != nil || len(b) < 24 || len(b) > 64 {
		return nil, ErrWebhookSecretMalformed
	}
	return b, nil
}

// SecretSealer protects signing secrets at rest: the database holds only
// what Seal returns, under a key the database does not hold. The context
// binds a sealed secret to its place (the company), so that it cannot be
// copied to another row and opened there.
type SecretSealer interface {
	// Seal encrypts a secret. Errors: the sealer has no key.
	Seal(secret []byte, context string) ([]byte, error)
	// Open decrypts what Seal returned under the same context. Errors:
	// the sealed bytes were changed, belong to another context, or were
	// sealed with a key the sealer does not have.
	Open(sealed []byte, context string) ([]byte, error)
}

// WebhookSecretContext is the sealing context of a company's secrets.
func WebhookSecretContext(companyID int64) string {
	return "jobboard webhook signing secret, company " + strconv.FormatInt(companyID, 10)
}

// WebhookSecretReveal is the one answer that carries a signing secret: the
// endpoint just created or whose secret was just rotated.
type WebhookSecretReveal struct {
	WebhookEndpoint
	// Secret is the new signing secret. It is shown this once.
	Secret string `json:"secret"`
}

// WebhookEvent is what happened, as it is delivered: the facts written in
// the transaction of the change, rendered by Payload.
type WebhookEvent struct {
	// ID is the event's id, the webhook-id header: the same on every
	// attempt and every replay, so that receivers can drop duplicates.
	ID         string
	Type       string
	CompanyID  int64
	OccurredAt time.Time

	JobID         int64
	ApplicationID int64
	CandidateID   int64
	OldStatus     ApplicationStatus
	NewStatus     ApplicationStatus
	// EndpointID is set for WebhookPing only.
	EndpointID int64
}

// webhookData is the "data" member of a payload; the members a type does
// not have are left out.
type webhookData struct {
	CompanyID     int64             `json:"company_id"`
	JobID         int64             `json:"job_id,omitempty"`
	ApplicationID int64             `json:"application_id,omitempty"`
	CandidateID   int64             `json:"candidate_id,omitempty"`
	Status        ApplicationStatus `json:"status,omitempty"`
	OldStatus     ApplicationStatus `json:"old_status,omitempty"`
	NewStatus     ApplicationStatus `json:"new_status,omitempty"`
	EndpointID    int64             `json:"endpoint_id,omitempty"`
}

// webhookPayload is the body of a delivery, in the shape Standard Webhooks
// recommends: type, timestamp, data.
type webhookPayload struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"`
	Data      webhookData `json:"data"`
}

// Payload returns the body delivered for e: the same bytes for the same
// facts, on every attempt.
//
//	{"type":"application.status_changed","timestamp":"2026-12-02T10:00:00.123456Z",
//	 "data":{"company_id":3,"job_id":12,"application_id":42,"candidate_id":7,
//	         "old_status":"reviewing","new_status":"interview"}}
func (e WebhookEvent) Payload() []byte {
	d := webhookData{CompanyID: e.CompanyID, JobID: e.JobID, ApplicationID: e.ApplicationID, CandidateID: e.CandidateID}
	switch e.Type {
	case WebhookApplicationSubmitted:
		d.Status = e.NewStatus
	case WebhookApplicationStatusChanged:
		d.OldStatus, d.NewStatus = e.OldStatus, e.NewStatus
	case WebhookApplicationWithdrawn:
		d.OldStatus = e.OldStatus
	case WebhookPing:
		d.EndpointID = e.EndpointID
	}
	b, _ := json.Marshal(webhookPayload{ // strings and integers: cannot fail
		Type:      e.Type,
		Timestamp: e.OccurredAt.UTC().Format(time.RFC3339Nano),
		Data:      d,
	})
	return b
}

// The states of a delivery.
const (
	// DeliveryPending: not delivered yet; attempts go on.
	DeliveryPending = "pending"
	// DeliveryDelivered: the endpoint answered 2xx.
	DeliveryDelivered = "delivered"
	// DeliveryFailed: given up (FailureReason says why); a replay starts
	// over.
	DeliveryFailed = "failed"
)

// WebhookDeliveryStates lists the states, for the filter of the log.
var WebhookDeliveryStates = []string{DeliveryPending, DeliveryDelivered, DeliveryFailed}

// The reasons a delivery failed (WebhookDelivery.FailureReason).
const (
	// FailureExpired: WebhookRetryWindow passed without a 2xx.
	FailureExpired = "retries_exhausted"
	// FailureGone: the endpoint answered 410 and was disabled.
	FailureGone = "gone"
	// FailureEndpointDisabled: the endpoint was disabled before the
	// delivery succeeded.
	FailureEndpointDisabled = "endpoint_disabled"
)

// WebhookDelivery is one event for one endpoint, with its attempts: an
// entry of the delivery log.
type WebhookDelivery struct {
	ID         int64  `json:"id"`
	EndpointID int64  `json:"endpoint_id"`
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type"`
	State      string `json:"state"`
	// FailureReason says why a failed delivery failed.
	FailureReason string `json:"failure_reason,omitempty"`
	// Attempts counts the attempts made since the last dispatch (or
	// replay); AttemptLog lists them, newest first, with those before.
	Attempts      int        `json:"attempts"`
	CreatedAt     time.Time  `json:"created_at"`
	DispatchedAt  time.Time  `json:"dispatched_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	// Payload is the body delivered.
	Payload    json.RawMessage  `json:"payload"`
	AttemptLog []WebhookAttempt `json:"attempt_log"`
}

// MaxLoggedResponse is the most of a response body the log keeps, in bytes.
const MaxLoggedResponse = 1024

// WebhookAttempt is one HTTP attempt of a delivery.
type WebhookAttempt struct {
	AttemptedAt time.Time `json:"attempted_at"`
	// StatusCode is the endpoint's answer; nil when none came (a timeout,
	// a refused connection, an address that may not be called).
	StatusCode *int  `json:"status_code"`
	LatencyMS  int64 `json:"latency_ms"`
	// Error says why an attempt without an answer failed.
	Error string `json:"error,omitempty"`
	// ResponseBody is the start of the answer's body, at most
	// MaxLoggedResponse bytes of UTF-8; ResponseTruncated tells that it
	// was longer.
	ResponseBody      string `json:"response_body,omitempty"`
	ResponseTruncated bool   `json:"response_truncated,omitempty"`
	// Trigger is what started the attempt's dispatch: "event", "replay"
	// or "ping".
	Trigger string `json:"trigger"`
}

// WebhookDeliveryFilter selects entries of the delivery log.
type WebhookDeliveryFilter struct {
	// State keeps one state; empty means all.
	State string
	// Limit is the page size, 1 to MaxPageSize; After the cursor.
	Limit int
	After int64
}

// WebhookStore keeps a company's endpoints and their delivery log. Every
// method checks that the actor is a member of the company and that the
// endpoint belongs to it; anyone else gets ErrNotFound, and an actor whose
// session has ended (see Actor) ErrSessionRevoked. So do the writes of
// WebhookWrites; those that dispatch a delivery (ReplayWebhookDelivery,
// PingWebhookEndpoint) write its outbox row in their transaction.
type WebhookStore interface {
	// WebhookEndpoints lists the company's endpoints, oldest first.
	// Errors: ErrNotFound.
	WebhookEndpoints(ctx context.Context, actor Actor, companyID int64) ([]WebhookEndpoint, error)
	// WebhookEndpoint returns one endpoint. Errors: ErrNotFound.
	WebhookEndpoint(ctx context.Context, actor Actor, companyID, id int64) (WebhookEndpoint, error)
	// WebhookDeliveries lists an endpoint's deliveries, newest first.
	// Errors: ErrNotFound.
	WebhookDeliveries(ctx context.Context, actor Actor, companyID, endpointID int64, f WebhookDeliveryFilter) (Page[WebhookDelivery], error)
}

// WebhookWrites are the writes beside WebhookStore's reads that a
// request makes through the Writes it is given (see Writes): in a keyed
// write's transaction, or each committing on its own.
type WebhookWrites interface {
	// CreateWebhookEndpoint stores an endpoint with its sealed secret.
	// Errors: ErrNotFound, ErrTooManyWebhookEndpoints.
	CreateWebhookEndpoint(ctx context.Context, actor Actor, companyID int64, n NewWebhookEndpoint, sealedSecret []byte) (WebhookEndpoint, error)
	// UpdateWebhookEndpoint applies a patch. Enabling a disabled endpoint
	// clears its failure record. Errors: ErrNotFound.
	UpdateWebhookEndpoint(ctx context.Context, actor Actor, companyID, id int64, p WebhookEndpointPatch) (WebhookEndpoint, error)
	// RotateWebhookSecret makes sealedSecret the signing secret; the one it
	// replaces signs too for overlap (zero: it stops at once). Errors:
	// ErrNotFound.
	RotateWebhookSecret(ctx context.Context, actor Actor, companyID, id int64, sealedSecret []byte, overlap time.Duration) (WebhookEndpoint, error)
	// ReplayWebhookDelivery dispatches a delivery again, whatever its
	// state, under the same event id, within p's bounds. Errors:
	// ErrNotFound, ErrWebhookEndpointDisabled, a
	// *WebhookDispatchThrottledError (nothing dispatched).
	ReplayWebhookDelivery(ctx context.Context, actor Actor, companyID, endpointID, deliveryID int64, p WebhookDispatchPolicy) (WebhookDelivery, error)
	// PingWebhookEndpoint dispatches a WebhookPing event to the endpoint,
	// within p's bounds; while a ping of the endpoint is pending it
	// returns that one and dispatches nothing. Errors: ErrNotFound,
	// ErrWebhookEndpointDisabled, a *WebhookDispatchThrottledError
	// (nothing dispatched).
	PingWebhookEndpoint(ctx context.Context, actor Actor, companyID, endpointID int64, p WebhookDispatchPolicy) (WebhookDelivery, error)
	// DeleteWebhookEndpoint deletes an endpoint and its log; its pending
	// deliveries are dropped. Errors: ErrNotFound.
	DeleteWebhookEndpoint(ctx context.Context, actor Actor, companyID, id int64) error
}

// ParseSecretOverlap reads an overlap in whole seconds, 0 to
// MaxSecretOverlap. Errors: out of range.
func ParseSecretOverlap(seconds int64) (time.Duration, error) {
	if seconds < 0 || seconds > int64(MaxSecretOverlap/time.Second) {
		return 0, fmt.Errorf("overlap of %d seconds: want 0 to %d", seconds, int64(MaxSecretOverlap/time.Second))
	}
	return time.Duration(seconds) * time.Second, nil
}
