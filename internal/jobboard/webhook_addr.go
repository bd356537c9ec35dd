package jobboard

import (
	"net/netip"
	"strings"
)

// blockedPrefixes are the address ranges a webhook may never be delivered
// to: those of IANA's special-purpose registries that are not globally
// reachable, and the ones that embed an IPv4 address in an IPv6 one (a
// NAT64 or 6to4 address can reach a private IPv4 network through a
// translator). The cloud metadata services live inside them:
// 169.254.169.254 (link-local), fd00:ec2::254 (unique-local),
// 100.100.100.200 (shared address space), 192.0.0.192 (IETF protocol
// assignments).
var blockedPrefixes = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (the metadata service lives there)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},

	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("::/96"), "an unspecified or IPv4-compatible address"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001::/23"), "an IETF protocol address (Teredo among them)"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("5f00::/16"), "a segment-routing address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique-local address (the IPv6 metadata service lives there)"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// BlockedWebhookAddr reports whether a webhook may not be delivered to a,
// and why. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as the
// IPv4 address it maps, which is where a connection to it goes. With
// allowLoopback (the WEBHOOK_ALLOW_INSECURE setting of local development
// and tests) loopback addresses are allowed; nothing else is.
func BlockedWebhookAddr(a netip.Addr, allowLoopback bool) (reason string, blocked bool) {
	if !a.IsValid() {
		return "an invalid address", true
	}
	a = a.Unmap().WithZone("")
	if allowLoopback && a.IsLoopback() {
		return "", false
	}
	for _, b := range blockedPrefixes {
		if b.prefix.Contains(a) {
			return b.reason, true
		}
	}
	return "", false
}

// parseHostAddr reads a URL host that is an IP address literal (an IPv6
// one without its brackets, as url.URL.Hostname gives it).
func parseHostAddr(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return a, err == nil
}
