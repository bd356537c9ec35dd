package httpapi

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// clientOf returns the address of the client that sent r, as the throttles
// count it: the address Config.ClientAddress gives (API Gateway's sourceIp
// behind the Lambda adapter), else the connection's remote address. Never a
// forwarded-for header: anyone can write one. An IPv6 client counts as its
// /64, the block one subscriber is usually given, so that stepping through
// its addresses does not make it a new client; an IPv4-mapped address
// counts as the IPv4 address.
func (s *server) clientOf(r *http.Request) string {
	addr := ""
	if s.ClientAddress != nil {
		addr = s.ClientAddress(r)
	}
	if addr == "" {
		addr = r.RemoteAddr
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr // not an IP (a test's pipe): counted as it is
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// What a throttle key counts; each digest starts with its purpose, so that
// no two kinds of key ever share a count.
const (
	loginKeyPurpose  = "login"
	clientKeyPurpose = "client"
	verifyKeyPurpose = "verify-email"
)

// throttleDigest names a count without keeping what it counts in clear:
// the SHA-256 of the purpose and the parts, each ended by a NUL (which no
// normalised email or client address contains).
func throttleDigest(purpose string, parts ...string) []byte {
	h := sha256.New()
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// accountKey counts the failed logins to one account (a normalised email,
// whether or not an account has it) from one client.
func (s *server) accountKey(email, client string) jobboard.ThrottleKey {
	return jobboard.ThrottleKey{Digest: throttleDigest(loginKeyPurpose, email, client), Policy: s.LoginPolicy}
}

// clientKey counts the credential attempts of one client across accounts:
// logins, and registrations that find the address taken.
func (s *server) clientKey(client string) jobboard.ThrottleKey {
	return jobboard.ThrottleKey{Digest: throttleDigest(clientKeyPurpose, client), Policy: s.ClientPolicy, Shared: true}
}

// verifyKey counts one client's attempts to verify an email address.
func (s *server) verifyKey(client string) jobboard.ThrottleKey {
	return jobboard.ThrottleKey{Digest: throttleDigest(verifyKeyPurpose, client), Policy: s.ClientPolicy, Shared: true}
}

// attempt counts an attempt under keys (see jobboard.LoginThrottle).
// Errors: *jobboard.BlockedError when a key is blocked, storage errors.
// Without a throttle it counts nothing.
func (s *server) attempt(ctx context.Context, keys ...jobboard.ThrottleKey) error {
	if s.Logins == nil {
		return nil
	}
	wait, err := s.Logins.LoginAttempt(ctx, s.Now(), keys...)
	if err != nil {
		return err
	}
	if wait > 0 {
		return &jobboard.BlockedError{RetryAfter: wait}
	}
	return nil
}

// attemptSucceeded records that the attempt counted under keys succeeded.
func (s *server) attemptSucceeded(ctx context.Context, keys ...jobboard.ThrottleKey) error {
	if s.Logins == nil {
		return nil
	}
	return s.Logins.LoginSucceeded(ctx, keys...)
}

// hashCounted runs fn, an argon2id computation for an attempt counted under
// keys, in a hashing slot (see hashLimiter.run). When no slot comes free,
// the attempt is taken back from every key before the error is returned:
// the password was never checked, so a crowd that keeps the server busy
// cannot make the owner's own attempts count as failures.
func (s *server) hashCounted(ctx context.Context, fn func(), keys ...jobboard.ThrottleKey) error {
	err := s.hashing.run(ctx, fn)
	if err == nil || s.Logins == nil {
		return err
	}
	if uerr := s.Logins.LoginUndecided(context.WithoutCancel(ctx), keys...); uerr != nil {
		loggerFrom(ctx, s.Logger).WarnContext(ctx, "take back an attempt left undecided", slog.Any("error", uerr))
	}
	return err
}
