package jobboard

import (
	"context"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"
)

// Password reset by email rides the rails of the verification email: the
// API queues an event per request, the worker makes the link's token in
// its claim (stored as a hash) and sends it, and the token, posted back
// once with a new password, sets it. Its answer never tells whether an
// account has the address: every well-formed request is answered 202
// after the same work, an event queued for an address no account has as
// for one that an account has.

// EventTypePasswordResetRequested is emitted by every password reset
// request within the address's bounds. user_id is the account that had
// the address when it was asked for, or absent (zero) when none had it:
// the event is queued all the same, and the worker finishes its claim as
// OutcomeNoAccount.
const EventTypePasswordResetRequested = "user.password_reset_requested"

// PasswordResetTokenTTL is how long a reset link works: short, since the
// link is as good as the password.
const PasswordResetTokenTTL = time.Hour

// PasswordResetRequest is the input of POST /v1/auth/password-reset.
type PasswordResetRequest struct {
	Email string `json:"email"`
}

// Normalize trims and lower-cases the address, as registration does.
func (r *PasswordResetRequest) Normalize() {
	r.Email = strings.ToLower(strings.TrimSpace(r.Email))
}

// Validate returns a *ValidationError when the address is not one that
// registration would accept. Such an address has no account, so refusing
// it tells nothing about which addresses have one.
func (r PasswordResetRequest) Validate() error {
	p := problems{}
	checkEmail(p, r.Email)
	return p.err()
}

// checkEmail adds a problem unless email is a plain address of at most
// MaxEmailLen characters.
func checkEmail(p problems, email string) {
	if email == "" {
		p.add("email", "is required")
	} else if utf8.RuneCountInString(email) > MaxEmailLen {
		p.add("email", "must be at most %d characters", MaxEmailLen)
	} else if a, err := mail.ParseAddress(email); err != nil || a.Address != email {
		p.add("email", "must be a plain email address")
	}
}

// PasswordReset is the input of POST /v1/auth/password-reset/confirm: the
// token of a reset link and the new password.
type PasswordReset struct {
	Token    string `json:"token"`
	Password string `json:"password"`
}

// Validate returns a *ValidationError naming a missing token or a password
// of the wrong length. Whether the token is one of ours is the store's
// question.
func (r PasswordReset) Validate() error {
	p := problems{}
	if r.Token == "" {
		p.add("token", "is required")
	}
	if n := utf8.RuneCountInString(r.Password); n < MinPasswordLen || n > MaxPasswordLen {
		p.add("password", "must be %d to %d characters", MinPasswordLen, MaxPasswordLen)
	}
	return p.err()
}

// PasswordResetEmail is the email with the link that resets a password. It
// carries no text that any user wrote.
type PasswordResetEmail struct {
	EventID string
	To      string
	// Link is the reset page's URL, with the token in its query.
	Link      string
	ExpiresAt time.Time
}

// PasswordResetStore checks the tokens of password resets.
type PasswordResetStore interface {
	// CheckPasswordResetToken reports whether the token with this hash
	// could reset a password at now, using nothing up: a password is
	// hashed only for a token that can. Errors:
	// ErrPasswordResetTokenInvalid, ErrPasswordResetTokenExpired,
	// ErrPasswordResetTokenUsed.
	CheckPasswordResetToken(ctx context.Context, tokenHash []byte, now time.Time) error
}

// PasswordResetWrites are the writes of password resets (see Writes).
type PasswordResetWrites interface {
	// RequestPasswordReset queues a reset email (an outbox event) to email
	// (normalised) for the account that has the address, within p's
	// bounds for the address; queued is false when the bounds refuse
	// (nothing queued). The statements are the same whether or not an
	// account has the address: without one, the event is queued without a
	// user id. Errors: database errors.
	RequestPasswordReset(ctx context.Context, email string, p VerificationPolicy, now time.Time) (queued bool, err error)
	// ResetPassword uses up the token with this hash and, in the same
	// statement, sets the account's password hash, marks its address
	// verified (the token was sent to it), records the change at now
	// (which ends every session issued before it, see
	// Actor.PasswordChangedAt) and uses up the account's other reset
	// tokens. Errors: as CheckPasswordResetToken's.
	ResetPassword(ctx context.Context, tokenHash []byte, passwordHash string, now time.Time) (User, error)
}
