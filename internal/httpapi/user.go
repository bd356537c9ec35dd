package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// session is the answer to a registration or login: the user and a bearer
// token for it.
type session struct {
	User      jobboard.User `json:"user"`
	Token     string        `json:"token"`
	TokenType string        `json:"token_type"`
	ExpiresAt time.Time     `json:"expires_at"`
}

// register creates an account, unverified, queues the email that verifies
// its address, and signs it in. The email is not queued when the address
// has had too many verification emails this hour (under an earlier
// account); the user can ask again with resend-verification. A
// registration counts as an attempt of its client (see clientKey) until it
// succeeds: one that finds the address taken stays counted, like a failed
// login, so that a client cannot probe addresses without limit.
// POST /v1/auth/register → 201 session; 409 email-taken; 422; 429; 503
// busy.
func (s *server) register(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	in, err := decodeValid[jobboard.Registration](w, r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	client := s.clientKey(s.clientOf(r))
	if err := s.attempt(ctx, client); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	var hash string
	if err := s.hashCounted(ctx, func() { hash = s.passwords.hash(in.Password) }, client); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	u, queued, err := st.Register(ctx, in, hash, s.VerificationPolicy, s.Now())
	if err != nil {
		return fmt.Errorf("register %s: %w", in.Role, err)
	}
	if err := s.attemptSucceeded(ctx, client); err != nil {
		return fmt.Errorf("registration of user %d: %w", u.ID, err)
	}
	if !queued {
		loggerFrom(ctx, s.Logger).InfoContext(ctx, "registered without a verification email: the address had too many this hour",
			slog.Int64("user_id", u.ID))
	}
	return s.writeSession(w, r, http.StatusCreated, u)
}

// login checks an email and password and signs the user in. An unknown
// email and a wrong password get the same answer after the same work, and
// so does an attempt refused after repeated failures (429, before any
// hashing), whether or not the account exists. Failures are counted per
// account and client, and per client across accounts (see accountKey,
// clientKey): a stranger's wrong passwords block the stranger, not the
// owner signing in from elsewhere.
// POST /v1/auth/login → 200 session; 401 invalid-credentials; 422; 429;
// 503 busy.
// Its only writes are the throttle's counts, which stand whatever the
// answer (see jobboard.Writes).
func (s *server) login(w http.ResponseWriter, r *http.Request, _ jobboard.Writes) error {
	var in jobboard.Credentials
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	email := strings.ToLower(strings.TrimSpace(in.Email))
	if err := validateCredentials(email, in.Password); err != nil {
		return err
	}
	ctx := r.Context()
	client := s.clientOf(r)
	keys := []jobboard.ThrottleKey{s.clientKey(client), s.accountKey(email, client)}
	// Counted as a failure before the password is checked, in the same step
	// as the check of the block, so that parallel attempts cannot pass the
	// check together; a success takes it back.
	if err := s.attempt(ctx, keys...); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	u, hash, err := s.Users.UserByEmail(ctx, email)
	switch {
	case errors.Is(err, jobboard.ErrNotFound):
		if err := s.hashCounted(ctx, func() { s.passwords.burn(in.Password) }, keys...); err != nil {
			return fmt.Errorf("login: %w", err)
		}
		return jobboard.ErrInvalidCredentials
	case err != nil:
		return fmt.Errorf("login: %w", err)
	}
	var ok bool
	if err := s.hashCounted(ctx, func() { ok, err = s.passwords.verify(in.Password, hash) }, keys...); err != nil {
		return fmt.Errorf("login of user %d: %w", u.ID, err)
	}
	if err != nil {
		return fmt.Errorf("verify password of user %d: %w", u.ID, err)
	}
	if !ok {
		return jobboard.ErrInvalidCredentials
	}
	if err := s.attemptSucceeded(ctx, keys...); err != nil {
		return fmt.Errorf("login of user %d: %w", u.ID, err)
	}
	return s.writeSession(w, r, http.StatusOK, u)
}

// validateCredentials rejects input that cannot be a login (before any
// password hashing is spent on it).
func validateCredentials(email, password string) error {
	var fields []jobboard.FieldError
	switch {
	case email == "":
		fields = append(fields, jobboard.FieldError{Field: "email", Detail: "is required"})
	case utf8.RuneCountInString(email) > jobboard.MaxEmailLen:
		fields = append(fields, jobboard.FieldError{Field: "email", Detail: fmt.Sprintf("must be at most %d characters", jobboard.MaxEmailLen)})
	}
	switch {
	case password == "":
		fields = append(fields, jobboard.FieldError{Field: "password", Detail: "is required"})
	case utf8.RuneCountInString(password) > jobboard.MaxPasswordLen:
		fields = append(fields, jobboard.FieldError{Field: "password", Detail: fmt.Sprintf("must be at most %d characters", jobboard.MaxPasswordLen)})
	}
	if fields != nil {
		return &jobboard.ValidationError{Fields: fields}
	}
	return nil
}

func (s *server) writeSession(w http.ResponseWriter, r *http.Request, status int, u jobboard.User) error {
	token, exp, err := s.tokens.issue(r.Context(), u)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusCreated {
		w.Header().Set("Location", "/v1/me")
	}
	return writeJSON(w, status, session{User: u, Token: token, TokenType: "Bearer", ExpiresAt: exp.UTC()})
}

// me returns the signed-in user: the account as the sign-in check read it
// (authenticate), so that the check costs this route no second read.
// GET /v1/me → 200 user; 401.
func (s *server) me(w http.ResponseWriter, r *http.Request) error {
	in, ok := signedInOf(r)
	if !ok {
		return jobboard.ErrUnauthenticated
	}
	a, u := in.actor, in.user
	me := meAnswer{User: u, EmailDelivery: jobboard.AddressDelivery{Deliverable: true}}
	if s.Suppressions != nil {
		sup, found, err := s.Suppressions.Suppression(r.Context(), u.Email)
		if err != nil {
			return fmt.Errorf("user %d: %w", a.UserID, err)
		}
		switch {
		case found && u.EmailVerified:
			me.EmailDelivery = jobboard.AddressDelivery{Reason: sup.Reason, Since: &sup.Since}
		case found:
			// Why and since when are the address's owner's to know, and
			// anyone can register any address: an account that has not
			// verified it learns only that email does not reach it.
			me.EmailDelivery = jobboard.AddressDelivery{}
		}
	}
	return writeJSON(w, http.StatusOK, me)
}

// meAnswer is GET /v1/me's answer: the account, and whether email reaches
// its address (not after a hard bounce or a complaint), and why not when
// the account has verified the address.
type meAnswer struct {
	jobboard.User
	EmailDelivery jobboard.AddressDelivery `json:"email_delivery"`
}

// resumeEmailInput is the body of POST /v1/me/email-delivery/resume: the
// owner's own statement that they want our email again after marking one
// as spam. It must be said, not implied by calling the route: a complaint
// is the one suppression that only its owner may lift.
type resumeEmailInput struct {
	WithdrawComplaint bool `json:"withdraw_complaint"`
}

// resumeEmailDelivery lifts the complaint suppression of the signed-in
// account's own address, when its owner says they withdraw the complaint
// and the account has verified the address since the complaint (409
// verification-required otherwise: having the address is not owning it),
// and answers the address's delivery after it. A second call finds nothing
// to lift (409) and changes nothing; with the same Idempotency-Key it
// replays the first answer. A bounce is not lifted here: a verification
// link that reaches the address does that. It sends no email, so it needs
// no limit of its own: each lift takes a new complaint of the owner's to
// matter again.
// POST /v1/me/email-delivery/resume → 200 email_delivery; 400; 401; 409
// not-suppressed, verification-required or suppressed-by-bounce; 422.
func (s *server) resumeEmailDelivery(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	a, err := s.actor(r)
	if err != nil {
		return err
	}
	var in resumeEmailInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if !in.WithdrawComplaint {
		return &jobboard.ValidationError{Fields: []jobboard.FieldError{{Field: "withdraw_complaint",
			Detail: "must be true: the owner of the address withdraws their spam complaint"}}}
	}
	if s.Suppressions == nil {
		return errEmailDeliveryOff
	}
	ctx := r.Context()
	d, err := st.WithdrawComplaint(ctx, a)
	if errors.Is(err, jobboard.ErrNotFound) {
		return fmt.Errorf("token of deleted user %d: %w", a.UserID, jobboard.ErrUnauthenticated)
	}
	if err != nil {
		return err
	}
	loggerFrom(ctx, s.Logger).InfoContext(ctx, "complaint withdrawn by the address's owner: email resumes",
		slog.Int64("user_id", a.UserID))
	return writeJSON(w, http.StatusOK, d)
}
