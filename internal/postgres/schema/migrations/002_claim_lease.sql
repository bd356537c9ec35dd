-- The worker's claim in three steps: claim with a lease (short transaction),
-- send with no transaction open, then record the outcome (short transaction).
--
-- A claim in progress has no outcome yet and holds a lease: lease_token
-- names the worker's attempt, lease_until is when another worker may take it
-- over (its worker died). A finished claim has its outcome and keeps its
-- token for the record. Rows from before this migration are finished.
ALTER TABLE processed_events
    ALTER COLUMN outcome DROP DEFAULT,
    ALTER COLUMN outcome DROP NOT NULL,
    ADD COLUMN lease_token    uuid,
    ADD COLUMN lease_until    timestamptz,
    ADD COLUMN attempts       integer NOT NULL DEFAULT 1,
    ADD COLUMN ses_message_id text,
    ADD COLUMN finished_at    timestamptz,
    ADD CONSTRAINT processed_events_lease_check
        CHECK (outcome IS NOT NULL OR (lease_token IS NOT NULL AND lease_until IS NOT NULL));

-- An outbox row that stayed unpublished for longer than the claim retention
-- (less a margin) is never published: a copy of it could outlive the claim
-- that guards its email. The sweeper marks it expired instead, and the
-- retention deletes it like a published row.
ALTER TABLE outbox ADD COLUMN expired_at timestamptz;

DROP INDEX outbox_unpublished_idx;
CREATE INDEX outbox_unpublished_idx ON outbox (created_at) WHERE published_at IS NULL AND expired_at IS NULL;
CREATE INDEX outbox_expired_idx ON outbox (expired_at) WHERE expired_at IS NOT NULL;
