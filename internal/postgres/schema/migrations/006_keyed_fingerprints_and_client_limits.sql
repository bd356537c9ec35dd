-- Request fingerprints are keyed (HMAC under a key derived from the server's
-- token key), and registration no longer takes Idempotency-Key. The answers
-- stored for registrations (scope 'anonymous') carry the unkeyed SHA-256 of
-- a body holding the plaintext password: a database read could test
-- password guesses against it at SHA-256 speed. Nothing reads them any
-- more, so they go now rather than at the end of their 24 hours. The other
-- scopes' unkeyed fingerprints are still recognised until they expire, so
-- that retries in flight across the upgrade are replayed.
DELETE FROM idempotency_keys WHERE scope = 'anonymous';

-- Failed attempts are counted per (account, client) and per client across
-- accounts; a row's digest says which (see internal/httpapi/client.go).
-- The counts keyed by the email alone no longer block anyone.
DELETE FROM login_failures;
COMMENT ON COLUMN login_failures.email_digest IS
    'SHA-256 of a purpose and its parts: (login, email, client) for an account from one client, (client, client) or (verify-email, client) for a client across accounts';
