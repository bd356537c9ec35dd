package webhook_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/webhook"
)

// zone is a DNS server inside a VPC, as the delivery function would ask
// it: names of the private zone answer private addresses, others do not
// exist, and its errors name the resolver's own address.
type zone map[string][]netip.Addr

// resolverAddr is the VPC resolver's address, as a lookup error names it.
const resolverAddr = "10.0.0.2:53"

func (z zone) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := z[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, Server: resolverAddr, IsNotFound: true}
}

// The delivery log a company reads says the same about a host that leads
// inside our network and about one that does not resolve: never the
// address, the resolver, or which of the two it was (which names exist in
// a private zone). Our own log keeps the address and the lookup's error.
func TestDeliveryLogHidesOurNetwork(t *testing.T) {
	t.Parallel()
	z := zone{
		"db.corp.example.com":   {netip.MustParseAddr("10.0.4.17")},
		"vpce.corp.example.com": {netip.MustParseAddr("fd00:ec2::254")},
	}
	p := newPipeline(t, func(c *webhook.Config) {
		c.Client = webhook.NewClient(webhook.ClientConfig{AllowInsecure: true, Timeout: attemptTimeout, Resolver: z})
	})
	var endpoints []jobboard.WebhookEndpoint
	for _, host := range []string{"db.corp.example.com", "vpce.corp.example.com", "missing.corp.example.com"} {
		e, _ := p.endpoint("http://" + host + ":8080/in")
		endpoints = append(endpoints, e)
	}
	p.apply()
	p.drain("an attempt of each endpoint", func() bool {
		for _, e := range endpoints {
			if ds := p.deliveries(e); len(ds) != 1 || len(ds[0].AttemptLog) == 0 {
				return false
			}
		}
		return true
	})

	for _, e := range endpoints {
		for _, a := range p.deliveries(e)[0].AttemptLog {
			if a.Error != "destination not allowed or could not be resolved" || a.StatusCode != nil {
				t.Errorf("%s: the delivery log says %q (status %v); want %q", e.URL, a.Error, a.StatusCode, "destination not allowed or could not be resolved")
			}
		}
	}
	logs := p.logs.String()
	for _, ours := range []string{"10.0.4.17", "fd00:ec2::254", resolverAddr} {
		if !strings.Contains(logs, ours) {
			t.Errorf("our log does not name %s:\n%s", ours, logs)
		}
	}
}
