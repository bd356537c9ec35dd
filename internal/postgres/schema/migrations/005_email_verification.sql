-- Verified recipients: a status email goes only to an address whose owner
-- has shown, by a link sent to it, that they read it.
--
-- Accounts created before this migration are unverified: nothing ever
-- checked that their addresses belong to them. They verify through
-- POST /v1/auth/resend-verification.
ALTER TABLE users ADD COLUMN email_verified_at timestamptz;

-- One verification link per claim of a verification event: the worker
-- makes the token when it claims the event (in the claim's statement) and
-- stores only its SHA-256 here; the plaintext exists only in the worker's
-- memory and in the email. The claim owns its token: releasing the claim
-- (a failed send), taking it over (a dead worker's lease) or deleting it
-- (retention) replaces or deletes the token, so a link from an earlier
-- attempt stops working. email is the address the link was sent to: the
-- link verifies that address, not whatever the account has later.
CREATE TABLE email_verification_tokens (
    event_id   text        PRIMARY KEY REFERENCES processed_events (event_id) ON DELETE CASCADE,
    token_hash bytea       NOT NULL UNIQUE,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX email_verification_tokens_user_idx ON email_verification_tokens (user_id);

-- Every verification email queued, by account and by address (a SHA-256 of
-- the normalised address, so that the count outlives the account and keeps
-- no address in clear): the resend cooldown and the hourly caps are
-- counted here, so they hold across every API instance. Rows older than
-- the hour are deleted as the same account or address asks again.
CREATE TABLE email_verification_requests (
    user_id      bigint      NOT NULL,
    email_digest bytea       NOT NULL,
    requested_at timestamptz NOT NULL
);
CREATE INDEX email_verification_requests_user_idx ON email_verification_requests (user_id, requested_at);
CREATE INDEX email_verification_requests_email_idx ON email_verification_requests (email_digest, requested_at);
