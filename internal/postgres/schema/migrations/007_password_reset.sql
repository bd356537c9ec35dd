-- Password reset by email, on the rails of the verification email: the API
-- queues an event per request, the worker makes the link's token in its
-- claim and sends it, and the token sets a new password once.
--
-- password_changed_at is the time of the account's last password reset
-- (NULL: never). A session carries the value it was issued under; once the
-- column is later than that, the session is refused. So a reset ends every
-- session issued before it, those of a login that checked the old password
-- while the reset ran included.
ALTER TABLE users ADD COLUMN password_changed_at timestamptz;

-- Every reset email queued, by address (a SHA-256 of the normalised
-- address, whether or not an account has it): the cooldown and the hourly
-- cap are counted here, across every API instance. No account id: the
-- bounds must not depend on whether an account has the address, or the
-- answer's timing would tell (an account has exactly one address, so the
-- address's bound is also the account's). Rows older than the hour are
-- deleted as the same address asks again, and by the sweeper.
CREATE TABLE password_reset_requests (
    email_digest bytea       NOT NULL,
    requested_at timestamptz NOT NULL
);
CREATE INDEX password_reset_requests_email_idx ON password_reset_requests (email_digest, requested_at);

-- One reset link per claim of a reset event, as email_verification_tokens
-- is for verification links: the worker stores only the SHA-256 of the
-- token it sends; releasing the claim, taking it over or deleting it
-- (retention) replaces or deletes the token. email is the address the link
-- went to, password_changed_at the account's when the link was made: the
-- token works only while the account still has both, so one reset ends
-- every link sent before it.
CREATE TABLE password_reset_tokens (
    event_id            text        PRIMARY KEY REFERENCES processed_events (event_id) ON DELETE CASCADE,
    token_hash          bytea       NOT NULL UNIQUE,
    user_id             bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email               text        NOT NULL,
    password_changed_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    used_at             timestamptz
);
CREATE INDEX password_reset_tokens_user_idx ON password_reset_tokens (user_id);
