-- Issue 10: the answers of keyed writes (Idempotency-Key), and the version of
-- the job listings behind the entity tags of search pages.

-- One row per keyed write that succeeded, inserted in the transaction of the
-- write itself: a committed write always has its answer here, and an answer
-- here always has its write. scope keeps callers apart ('user:<id>', or
-- 'anonymous' for registration, where the key alone scopes). Rows older than
-- the key's lifetime (24 hours) are ignored by the API and deleted by the
-- sweeper, through the index on created_at.
CREATE TABLE idempotency_keys (
    scope       text        NOT NULL,
    key         text        NOT NULL,
    fingerprint bytea       NOT NULL,
    status      smallint    NOT NULL,
    header      jsonb       NOT NULL,
    body        bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);

-- A counter that every statement changing jobs or company memberships bumps,
-- in its own transaction. A search page read after the counter is never older
-- than the counter says, so (counter, query, caller) is a cheap entity tag for
-- the page: If-None-Match is answered with one single-row read instead of the
-- search. Statement-level triggers: a bulk insert bumps it once. Writers of
-- jobs queue on this one row until they commit, which is fine for a job
-- board's rate of postings (and a transaction must not change two jobs in
-- separate statements in an order that another could reverse).
CREATE TABLE job_listing_version (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version   bigint  NOT NULL
);
INSERT INTO job_listing_version (singleton, version) VALUES (true, 1);

CREATE FUNCTION bump_job_listing_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE job_listing_version SET version = version + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_bump_listing_version
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION bump_job_listing_version();
CREATE TRIGGER company_members_bump_listing_version
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON company_members
    FOR EACH STATEMENT EXECUTE FUNCTION bump_job_listing_version();
