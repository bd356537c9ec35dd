package jobboard

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"
)

// Role is what a user is on the board.
type Role string

// The roles a user can have.
const (
	RoleCandidate Role = "candidate"
	RoleEmployer  Role = "employer"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleCandidate || r == RoleEmployer }

// User is a registered account. The password hash never leaves the store.
type User struct {
	ID        int64     `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	// EmailVerified: the owner followed a verification link sent to Email.
	// Only then do status emails go to it.
	EmailVerified bool `json:"email_verified"`
	// PasswordChangedAt is when the password was last reset (zero: never).
	// A session issued under an earlier value is refused (see
	// Actor.PasswordChangedAt). Not part of the JSON.
	PasswordChangedAt time.Time `json:"-"`
}

// Actor is the signed-in user on whose behalf a store method runs. The stores
// use it to decide what the caller may see and change.
type Actor struct {
	UserID int64
	Role   Role
	// PasswordChangedAt is the account's User.PasswordChangedAt when the
	// session was issued. An actor whose account's password has been
	// reset since is refused (ErrSessionRevoked, see User.SessionLive) by
	// the API before it does anything, and by the stores in the statement
	// that does the actor's work: a reset ends every session issued
	// before it. It is the password the session was issued under, not the
	// time the token was made, so a login that checked the old password
	// while the reset committed gets a session that is already over.
	PasswordChangedAt time.Time
}

// SessionLive tells whether the session of a, issued for this account,
// is live: the account's password has not been reset since
// (a.PasswordChangedAt). Errors: ErrSessionRevoked.
func (u User) SessionLive(a Actor) error {
	if u.PasswordChangedAt.After(a.PasswordChangedAt) {
		return ErrSessionRevoked
	}
	return nil
}

// Limits on user input, in characters.
const (
	MaxEmailLen    = 254
	MaxNameLen     = 200
	MinPasswordLen = 8
	MaxPasswordLen = 128
)

// Registration is the input of a new account.
type Registration struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
	Role     Role   `json:"role"`
}

// Normalize trims the name and lower-cases the email, so that the same
// address cannot register twice in different cases.
func (r *Registration) Normalize() {
	r.Email = strings.ToLower(strings.TrimSpace(r.Email))
	r.Name = strings.TrimSpace(r.Name)
}

// Validate returns a *ValidationError naming every invalid field.
func (r Registration) Validate() error {
	p := problems{}
	checkEmail(p, r.Email)
	if n := utf8.RuneCountInString(r.Password); n < MinPasswordLen || n > MaxPasswordLen {
		p.add("password", "must be %d to %d characters", MinPasswordLen, MaxPasswordLen)
	}
	if r.Name == "" {
		p.add("name", "is required")
	} else if utf8.RuneCountInString(r.Name) > MaxNameLen {
		p.add("name", "must be at most %d characters", MaxNameLen)
	}
	if !r.Role.Valid() {
		p.add("role", "must be %q or %q", RoleCandidate, RoleEmployer)
	}
	return p.err()
}

// Credentials is the input of a login.
type Credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// UserStore keeps accounts, the verification of their addresses and the
// resets of their passwords.
type UserStore interface {
	PasswordResetStore
	// UserByEmail returns a user and its password hash. Errors: ErrNotFound.
	UserByEmail(ctx context.Context, email string) (User, string, error)
	// UserByID returns a user. Errors: ErrNotFound.
	UserByID(ctx context.Context, id int64) (User, error)
}

// UserWrites are the writes beside UserStore's reads that a
// request makes through the Writes it is given (see Writes): in a keyed
// write's transaction, or each committing on its own.
type UserWrites interface {
	// Register stores a new, unverified user with the given password hash
	// and, in the same transaction, queues a verification email (an outbox
	// event) unless p's bounds for the address refuse it; queued says
	// which, and the user can ask again later. Errors: ErrEmailTaken.
	Register(ctx context.Context, r Registration, passwordHash string, p VerificationPolicy, now time.Time) (u User, queued bool, err error)
	// RequestVerification queues another verification email for the
	// user, within p's bounds. Errors: ErrNotFound, ErrAlreadyVerified, a
	// *VerificationThrottledError (nothing queued).
	RequestVerification(ctx context.Context, userID int64, p VerificationPolicy, now time.Time) error
	// VerifyEmail marks verified the address that the token with this
	// hash was sent to, and uses the token up. Errors:
	// ErrVerificationTokenInvalid (unknown), ErrVerificationTokenExpired,
	// ErrVerificationTokenUsed.
	VerifyEmail(ctx context.Context, tokenHash []byte, now time.Time) (User, error)
}
