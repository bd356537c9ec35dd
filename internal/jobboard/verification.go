package jobboard

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"
)

// Email verification: a status email carries text that other users wrote
// (a job title, a company name), so it goes only to an address whose owner
// has shown that they read it, by following a link sent there. The link's
// email carries no text that any user wrote.

// EventTypeEmailVerificationRequested is emitted when an account asks for
// a verification link (at registration, and on each resend). Its one field
// is user_id: the worker loads the account's address when it claims the
// event, and makes the token then (see VerificationToken).
const EventTypeEmailVerificationRequested = "user.email_verification_requested"

// VerificationTokenTTL is how long a verification link works.
const VerificationTokenTTL = 24 * time.Hour

// verificationTokenBytes is the token's entropy: 256 bits, so that
// guessing one is hopeless and a plain SHA-256 is a safe way to store it.
const verificationTokenBytes = 32

// VerificationTokenLen is the length of a token's text (unpadded base64url).
var VerificationTokenLen = base64.RawURLEncoding.EncodedLen(verificationTokenBytes)

// NewVerificationToken returns a fresh random token (URL-safe text) and
// the hash that is stored in its place.
func NewVerificationToken() (token string, hash []byte) {
	b := make([]byte, verificationTokenBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand panics on a broken source)
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, HashVerificationToken(token)
}

// HashVerificationToken returns the stored form of a token: its SHA-256.
// A token has 256 random bits, so no slow hash is needed: there is nothing
// to guess.
func HashVerificationToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// ValidVerificationToken reports whether s has the shape of a token, so
// that anything else is refused before the database is asked.
func ValidVerificationToken(s string) bool {
	if len(s) != VerificationTokenLen {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == verificationTokenBytes
}

// EmailDigest is the key under which verification emails are counted per
// address: a SHA-256 of the normalised address, so that the count keeps no
// address in clear.
func EmailDigest(email string) []byte {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(email))))
	return sum[:]
}

// VerificationPolicy bounds the verification emails one account, and one
// address, can be sent: one per Cooldown, at most PerAccount and
// PerAddress per Window. They are counted in the database, so the bounds
// hold across API instances.
type VerificationPolicy struct {
	Cooldown   time.Duration
	Window     time.Duration
	PerAccount int
	PerAddress int
}

// VerificationHistory is what the store knows of recent verification
// emails, within the policy's window.
type VerificationHistory struct {
	// LastForAccount is the account's latest request; zero if none.
	LastForAccount time.Time
	// AccountCount and AccountOldest: the account's requests in the window.
	AccountCount  int
	AccountOldest time.Time
	// AddressCount and AddressOldest: the address's requests in the window
	// (from any account that had it).
	AddressCount  int
	AddressOldest time.Time
}

// Wait returns how long, at now, the next verification email must wait,
// and which bound says so ("" when it need not wait).
func (p VerificationPolicy) Wait(h VerificationHistory, now time.Time) (time.Duration, string) {
	var (
		wait   time.Duration
		reason string
	)
	consider := func(d time.Duration, why string) {
		if d > wait {
			wait, reason = d, why
		}
	}
	if !h.LastForAccount.IsZero() {
		consider(h.LastForAccount.Add(p.Cooldown).Sub(now), "cooldown")
	}
	if h.AccountCount >= p.PerAccount {
		consider(h.AccountOldest.Add(p.Window).Sub(now), "account")
	}
	if h.AddressCount >= p.PerAddress {
		consider(h.AddressOldest.Add(p.Window).Sub(now), "address")
	}
	return wait, reason
}

// RecipientDetails is what the verification email needs: the account's
// address and the link's token. Nothing a user typed goes in it.
type RecipientDetails struct {
	UserID int64
	Email  string
	// VerifiedAt is when the account last verified the address (zero:
	// never), for a verification email: it decides whether the link may
	// pass a complaint (Suppression.Blocks).
	VerifiedAt time.Time
	// Token is the plaintext of the link's token. It exists only here, in
	// memory, and in the email: the store keeps its hash.
	Token     string
	ExpiresAt time.Time
}

// VerificationEmail is the email with the link that verifies an address.
type VerificationEmail struct {
	EventID string
	To      string
	// Link is the verification URL, with the token in its query.
	Link      string
	ExpiresAt time.Time
}
