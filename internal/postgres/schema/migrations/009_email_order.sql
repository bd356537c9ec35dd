-- Issue 18: status emails in order (docs/design.md, "Order").
--
-- One row per application whose status email has been claimed for sending.
-- version is the highest version (the place of a change in the
-- application's status history) whose email has been claimed, and event_id
-- its event; lease_token and lease_until, while set, are that claim's
-- lease: at most one status email of an application is in flight. The
-- claim statement of a status event takes the row under its row lock, in
-- the statement that claims the event, so two workers cannot both pass
-- it: an event older than version finishes as superseded, a newer one
-- waits (busy) while the lease is live and takes the row once it is not.
-- Recording or releasing the claim clears the lease, in the same statement.
CREATE TABLE application_email_order (
    application_id bigint      PRIMARY KEY REFERENCES applications (id) ON DELETE CASCADE,
    version        bigint      NOT NULL,
    event_id       text        NOT NULL,
    lease_token    uuid,
    lease_until    timestamptz,
    CHECK ((lease_token IS NULL) = (lease_until IS NULL))
);
-- Recording an outcome finds the lease by its token.
CREATE UNIQUE INDEX application_email_order_lease_idx ON application_email_order (lease_token)
    WHERE lease_token IS NOT NULL;
