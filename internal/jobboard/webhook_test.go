package jobboard_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Every range the delivery function must never call is refused, with the
// IPv4-mapped form of each IPv4 one; public addresses pass.
func TestBlockedWebhookAddr(t *testing.T) {
	t.Parallel()
	blocked := []string{
		"0.0.0.0", "0.1.2.3", // this network
		"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254", "192.168.1.1", // private
		"100.64.0.1", "100.127.255.254", "100.100.100.200", // CGNAT, Alibaba's metadata
		"127.0.0.1", "127.255.255.254", // loopback
		"169.254.0.1", "169.254.169.254", "169.254.170.2", // link-local, EC2 and ECS metadata
		"192.0.0.1", "192.0.0.192", "192.0.2.1", "198.51.100.7", "203.0.113.9", // IETF, documentation
		"198.18.0.1", "198.19.255.255", // benchmarking
		"192.88.99.1",                                                  // 6to4 relay
		"224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255", // multicast, reserved, broadcast
		"::", "::1", "::127.0.0.1", // unspecified, loopback, IPv4-compatible
		"fc00::1", "fd00:ec2::254", "fdff:ffff::1", // unique-local, EC2's IPv6 metadata
		"fe80::1", "febf::1", "fec0::1", // link-local, site-local
		"ff02::1", "2001:db8::1", "3fff::1", // multicast, documentation
		"64:ff9b::a00:1", "64:ff9b:1::1", // NAT64
		"2001::1", "2002:a00:1::1", // Teredo, 6to4
		"100::1", "5f00::1", "::ffff:0:a00:1", // discard, SRv6, IPv4-translated
	}
	for _, s := range blocked {
		a := netip.MustParseAddr(s)
		if reason, ok := jobboard.BlockedWebhookAddr(a, false); !ok || reason == "" {
			t.Errorf("%s: allowed, want blocked", s)
		}
		if a.Is4() {
			mapped := netip.AddrFrom16(a.As16())
			if _, ok := jobboard.BlockedWebhookAddr(mapped, false); !ok {
				t.Errorf("%s (IPv4-mapped %s): allowed, want blocked", s, mapped)
			}
		}
	}
	for _, s := range []string{"93.184.216.34", "1.1.1.1", "8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001::64", "::ffff:93.184.216.34", "100.63.255.255", "100.128.0.0", "172.32.0.1"} {
		if reason, ok := jobboard.BlockedWebhookAddr(netip.MustParseAddr(s), false); ok {
			t.Errorf("%s: blocked (%s), want allowed", s, reason)
		}
	}
	// The development setting opens loopback, and only loopback.
	for _, s := range []string{"127.0.0.1", "::1", "::ffff:127.0.0.1"} {
		if _, ok := jobboard.BlockedWebhookAddr(netip.MustParseAddr(s), true); ok {
			t.Errorf("%s with loopback allowed: blocked", s)
		}
	}
	for _, s := range []string{"169.254.169.254", "10.0.0.1", "fd00:ec2::254", "::ffff:169.254.169.254"} {
		if _, ok := jobboard.BlockedWebhookAddr(netip.MustParseAddr(s), true); !ok {
			t.Errorf("%s with loopback allowed: allowed, want blocked", s)
		}
	}
	if _, ok := jobboard.BlockedWebhookAddr(netip.Addr{}, false); !ok {
		t.Error("the zero address is allowed")
	}
}

func TestWebhookURLPolicy(t *testing.T) {
	t.Parallel()
	strict := jobboard.WebhookURLPolicy{}
	dev := jobboard.WebhookURLPolicy{AllowInsecure: true}
	cases := []struct {
		url       string
		strict    bool // allowed by the default policy
		insecure  bool // allowed with WEBHOOK_ALLOW_INSECURE
		wantInErr string
	}{
		{"https://hooks.example.com/jobboard", true, true, ""},
		{"https://hooks.example.com:443/x?a=1", true, true, ""},
		{"https://93.184.216.34/hook", true, true, ""},
		{"https://[2606:4700:4700::1111]/hook", true, true, ""},
		{"http://hooks.example.com/x", false, true, "https"},
		{"https://hooks.example.com:8443/x", false, true, "port 443"},
		{"http://127.0.0.1:8080/x", false, true, ""},
		{"https://localhost/x", false, true, "local host"},
		{"https://api.internal/x", false, true, "local host"},
		{"https://169.254.169.254/latest/meta-data", false, false, "link-local"},
		{"https://[::ffff:169.254.169.254]/x", false, false, "link-local"},
		{"https://10.1.2.3/x", false, false, "private"},
		{"https://[fd00:ec2::254]/x", false, false, "unique-local"},
		{"https://user:pw@hooks.example.com/x", false, false, "user name"},
		{"https://hooks.example.com/x#frag", false, false, "fragment"},
		{"ftp://hooks.example.com/x", false, false, "https"},
		{"/relative", false, false, "https"},
		{"https:///no-host", false, false, "host"},
		{"https://hooks.example.com/a b", false, false, "printable"},
		{"https://hooks.example.com:0/x", false, false, "port"},
		{"https://hooks.example.com:99999/x", false, false, "port"},
		{"", false, false, "required"},
		{"https://2852039166/", false, false, "standard way"},
		{"https://0251.0376.0251.0376/", false, false, "standard way"},
		{"https://0xa9.0xfe.0xa9.0xfe/", false, false, "standard way"},
		{"https://hooks.example.com./x", true, true, ""},
		// Empty labels: "localhost.." is not "localhost" to the checks
		// below, but a resolver may read it as such.
		{"https://localhost../", false, false, "empty label"},
		{"https://127.0.0.1../", false, false, "empty label"},
		{"https://0x7f.1../", false, false, "empty label"},
		{"https://hooks..example.com/x", false, false, "empty label"},
		{"https://.hooks.example.com/x", false, false, "empty label"},
		{"https://./x", false, false, "empty label"},
		{"https://ab.cafe/x", true, true, ""},
		{"https://" + strings.Repeat("a", jobboard.MaxWebhookURLLen), false, false, "at most"},
	}
	for _, c := range cases {
		for _, p := range []struct {
			pol  jobboard.WebhookURLPolicy
			want bool
		}{{strict, c.strict}, {dev, c.insecure}} {
			err := p.pol.Check(c.url)
			if (err == nil) != p.want {
				t.Errorf("%+v.Check(%q) = %v, want allowed %v", p.pol, c.url, err, p.want)
			}
			var ve *jobboard.ValidationError
			if err != nil && (!errors.As(err, &ve) || ve.Fields[0].Field != "url") {
				t.Errorf("Check(%q) = %v, want a ValidationError on url", c.url, err)
			}
			if err != nil && !p.pol.AllowInsecure && c.wantInErr != "" && !strings.Contains(err.Error(), c.wantInErr) {
				t.Errorf("Check(%q) = %v, want it to mention %q", c.url, err, c.wantInErr)
			}
		}
	}
}

func TestNewWebhookEndpointValidate(t *testing.T) {
	t.Parallel()
	n := jobboard.NewWebhookEndpoint{URL: " https://h.example.com/x ", EventTypes: []string{"job.closed", "application.submitted", "job.closed"}}
	n.Normalize()
	if err := n.Validate(); err != nil {
		t.Fatalf("valid endpoint: %v", err)
	}
	if n.URL != "https://h.example.com/x" || strings.Join(n.EventTypes, ",") != "application.submitted,job.closed" {
		t.Errorf("normalised to %+v", n)
	}
	bad := jobboard.NewWebhookEndpoint{URL: "nope", EventTypes: []string{"application.deleted"}, Description: strings.Repeat("é", jobboard.MaxWebhookDescriptionLen+1)}
	var ve *jobboard.ValidationError
	if err := bad.Validate(); !errors.As(err, &ve) || len(ve.Fields) != 3 {
		t.Errorf("invalid endpoint: %v, want 3 field errors", err)
	}
	if err := (jobboard.NewWebhookEndpoint{URL: "https://h.example.com"}).Validate(); err == nil {
		t.Error("no event types: accepted")
	}
	if err := (jobboard.WebhookEndpointPatch{}).Validate(); err == nil {
		t.Error("empty patch: accepted")
	}
	on := true
	if err := (jobboard.WebhookEndpointPatch{Enabled: &on}).Validate(); err != nil {
		t.Errorf("patch of enabled: %v", err)
	}
}

func TestWebhookSecret(t *testing.T) {
	t.Parallel()
	a, b := jobboard.NewWebhookSecret(), jobboard.NewWebhookSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("secrets %q, %q", a, b)
	}
	key, err := jobboard.WebhookSecretKey(a)
	if err != nil || len(key) != 32 {
		t.Fatalf("key of %q: %d bytes, %v", a, len(key), err)
	}
	for _, s := range []string{"whsec_!!", "whsec_" + strings.Repeat("A", 8), ""} {
		if _, err := jobboard.WebhookSecretKey(s); !errors.Is(err, jobboard.ErrWebhookSecretMalformed) {
			t.Errorf("key of %q: %v", s, err)
		}
	}
}

// The payload of each type carries its facts and nothing of another type's.
func TestWebhookEventPayload(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 10, 0, 0, 123456000, time.FixedZone("CET", 3600))
	base := jobboard.WebhookEvent{ID: "e", CompanyID: 3, JobID: 12, ApplicationID: 42, CandidateID: 7, OccurredAt: at,
		OldStatus: jobboard.StatusReviewing, NewStatus: jobboard.StatusInterview}
	cases := map[string]string{
		jobboard.WebhookApplicationSubmitted:     `{"type":"application.submitted","timestamp":"2026-12-02T09:00:00.123456Z","data":{"company_id":3,"job_id":12,"application_id":42,"candidate_id":7,"status":"interview"}}`,
		jobboard.WebhookApplicationStatusChanged: `{"type":"application.status_changed","timestamp":"2026-12-02T09:00:00.123456Z","data":{"company_id":3,"job_id":12,"application_id":42,"candidate_id":7,"old_status":"reviewing","new_status":"interview"}}`,
		jobboard.WebhookApplicationWithdrawn:     `{"type":"application.withdrawn","timestamp":"2026-12-02T09:00:00.123456Z","data":{"company_id":3,"job_id":12,"application_id":42,"candidate_id":7,"old_status":"reviewing"}}`,
	}
	for typ, want := range cases {
		e := base
		e.Type = typ
		if got := string(e.Payload()); got != want {
			t.Errorf("%s:\n got %s\nwant %s", typ, got, want)
		}
	}
	closed := jobboard.WebhookEvent{Type: jobboard.WebhookJobClosed, CompanyID: 3, JobID: 12, OccurredAt: at}
	if got, want := string(closed.Payload()), `{"type":"job.closed","timestamp":"2026-12-02T09:00:00.123456Z","data":{"company_id":3,"job_id":12}}`; got != want {
		t.Errorf("job.closed:\n got %s\nwant %s", got, want)
	}
	ping := jobboard.WebhookEvent{Type: jobboard.WebhookPing, CompanyID: 3, EndpointID: 9, OccurredAt: at}
	if got, want := string(ping.Payload()), `{"type":"webhook.ping","timestamp":"2026-12-02T09:00:00.123456Z","data":{"company_id":3,"endpoint_id":9}}`; got != want {
		t.Errorf("ping:\n got %s\nwant %s", got, want)
	}
}

func TestParseSecretOverlap(t *testing.T) {
	t.Parallel()
	if d, err := jobboard.ParseSecretOverlap(3600); err != nil || d != time.Hour {
		t.Errorf("3600: %v, %v", d, err)
	}
	for _, s := range []int64{-1, int64(jobboard.MaxSecretOverlap/time.Second) + 1} {
		if _, err := jobboard.ParseSecretOverlap(s); err == nil {
			t.Errorf("%d: accepted", s)
		}
	}
}

func TestWebhookPipelineEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ok := []jobboard.Event{
		{Type: jobboard.EventTypeWebhookDelivery, EventID: "a", OccurredAt: at, DeliveryID: 1, Generation: 1},
		{Type: jobboard.EventTypeWebhookEndpointDisabled, EventID: "b", OccurredAt: at, UserID: 1, EndpointID: 2, CompanyID: 3},
	}
	for _, ev := range ok {
		if err := ev.Validate(); err != nil {
			t.Errorf("%s: %v", ev.Type, err)
		}
	}
	if !jobboard.ForWebhookQueue(jobboard.EventTypeWebhookDelivery) || jobboard.ForWebhookQueue(jobboard.EventTypeWebhookEndpointDisabled) ||
		jobboard.ForWebhookQueue(jobboard.EventTypeStatusChanged) {
		t.Error("ForWebhookQueue routes wrongly")
	}
}
