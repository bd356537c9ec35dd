package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// verifyEmailInput is the body of POST /v1/auth/verify-email: the token of
// the link in the verification email.
type verifyEmailInput struct {
	Token string `json:"token"`
}

// verifyEmail verifies the address a verification link was sent to. It
// needs no sign-in: the token is the proof, and the link may be opened on
// another device. The answer names no account unless the token is good, so
// it tells nothing about which users exist. A token that is not ours and
// one of the wrong shape get the same answer. Tokens are 256 bits, so
// guessing is hopeless; still each attempt costs a lookup, so one client's
// failed attempts are counted and limited like its logins (see verifyKey).
// POST /v1/auth/verify-email → 200 user; 400 invalid-verification-token;
// 410 verification-token-expired or verification-token-used; 422; 429.
func (s *server) verifyEmail(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	var in verifyEmailInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.Token == "" {
		return &jobboard.ValidationError{Fields: []jobboard.FieldError{{Field: "token", Detail: "is required"}}}
	}
	ctx := r.Context()
	key := s.verifyKey(s.clientOf(r))
	if err := s.attempt(ctx, key); err != nil {
		return fmt.Errorf("verify email: %w", err)
	}
	if !jobboard.ValidVerificationToken(in.Token) {
		return fmt.Errorf("verify email: token of the wrong shape: %w", jobboard.ErrVerificationTokenInvalid)
	}
	u, err := st.VerifyEmail(ctx, jobboard.HashVerificationToken(in.Token), s.Now())
	if err != nil {
		return err
	}
	if err := s.attemptSucceeded(ctx, key); err != nil {
		return fmt.Errorf("verify email of user %d: %w", u.ID, err)
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, u)
}

// resendVerification queues another verification email for the signed-in
// user's address: at most one a minute, and a few an hour per account and
// per address (429 with Retry-After beyond that).
// POST /v1/auth/resend-verification → 202; 401; 409 already-verified; 429.
func (s *server) resendVerification(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	a, err := s.actor(r)
	if err != nil {
		return err
	}
	err = st.RequestVerification(r.Context(), a.UserID, s.VerificationPolicy, s.Now())
	if errors.Is(err, jobboard.ErrNotFound) {
		return fmt.Errorf("token of deleted user %d: %w", a.UserID, jobboard.ErrUnauthenticated)
	}
	if err != nil {
		return fmt.Errorf("resend verification to user %d: %w", a.UserID, err)
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}
