package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Neither reset endpoint takes an Idempotency-Key (routes.go registers
// them with keysIgnored: a key is checked, then ignored). A stored answer
// would be a second way through each, keyed by the client: for a request,
// one that skips the work every other request does (so its timing differs)
// and keeps a digest of the address under the key, where the reset
// requests keep only the address's digest for an hour; for a confirmation,
// the fingerprint would keep a fast hash of a body that holds the new
// password and the token. Neither needs one: a retried request queues at
// most one more email within the address's bounds, with a link that works
// as well as the first; a retried confirmation finds its token used (410),
// and the new password is set.

// requestPasswordReset queues an email with a password reset link to an
// address. The answer is 202 with no body for every well-formed address:
// the store runs the same statements whether or not an account has it
// (without one, the event it queues carries no account and the worker
// sends nothing), and the event is relayed alike. An address over its
// bounds gets the same 202, and no email.
// POST /v1/auth/password-reset → 202; 400; 422.
func (s *server) requestPasswordReset(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	in, err := decodeValid[jobboard.PasswordResetRequest](w, r)
	if err != nil {
		return err
	}
	queued, err := st.RequestPasswordReset(r.Context(), in.Email, s.PasswordResetPolicy, s.Now())
	if err != nil {
		return fmt.Errorf("request password reset: %w", err)
	}
	if !queued {
		// The address asked too often: no email, the same answer.
		loggerFrom(r.Context(), s.Logger).InfoContext(r.Context(), "password reset not queued: the address had too many this hour",
			slog.String("email_tag", s.addressTag(r.Context(), in.Email)))
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// resetPassword sets a new password with the token of a reset link. It
// needs no sign-in: the token is the proof. The token is checked before
// the password is hashed, so that a wrong token costs no argon2id; the
// reset itself (the token used up, the password set, the address marked
// verified, every earlier session ended) is one statement. The answer is
// the account, and no session: the user signs in with the new password,
// as a password manager expects.
// POST /v1/auth/password-reset/confirm → 200 user; 400
// invalid-password-reset-token; 410 password-reset-token-expired or
// password-reset-token-used; 422.
func (s *server) resetPassword(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	in, err := decodeValid[jobboard.PasswordReset](w, r)
	if err != nil {
		return err
	}
	if !jobboard.ValidVerificationToken(in.Token) { // reset tokens have the same shape
		return fmt.Errorf("reset password: token of the wrong shape: %w", jobboard.ErrPasswordResetTokenInvalid)
	}
	ctx := r.Context()
	tokenHash := jobboard.HashVerificationToken(in.Token)
	if err := s.Users.CheckPasswordResetToken(ctx, tokenHash, s.Now()); err != nil {
		return err
	}
	u, err := st.ResetPassword(ctx, tokenHash, s.passwords.hash(in.Password), s.Now())
	if err != nil {
		return err
	}
	loggerFrom(ctx, s.Logger).InfoContext(ctx, "password reset; earlier sessions ended", slog.Int64("user_id", u.ID))
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, u)
}
