-- Hostile input and abuse: searches with a bounded cost, and login backoff.

-- The location filter is an exact match on the normalised (lower-cased)
-- location, answered by this index in id order: a location that matches
-- nothing costs one index descent instead of a walk over every open job.
CREATE INDEX jobs_open_location_idx ON jobs (lower(location), id DESC) WHERE status = 'open';

-- Location, remote and employment type together: a combination that no job
-- has (each value common, the three together rare) is answered by one index
-- range in id order instead of by a walk over every job of the location.
CREATE INDEX jobs_open_facets_idx ON jobs (lower(location), remote, employment_type, id DESC) WHERE status = 'open';

-- salary_min keeps jobs whose salary_max reaches it; a value above every
-- salary is answered by this index at once instead of by a walk.
CREATE INDEX jobs_open_salary_idx ON jobs (salary_max) WHERE status = 'open';

-- Without the pending list, a text search reads only the index's posting
-- lists. With fastupdate (the default) new entries wait in an unsorted list
-- that every search scans in full until VACUUM merges it; a job is written
-- rarely and searched often, so the writer pays instead.
ALTER INDEX jobs_search_idx SET (fastupdate = off);
SELECT gin_clean_pending_list('jobs_search_idx'::regclass);

-- Failed logins per account, so that repeated failures are slowed down
-- across every API instance. The key is a digest of the normalised email,
-- whether or not an account has it: the answer must not tell them apart.
-- A success deletes the row; a failure long after the last one starts the
-- count again.
CREATE TABLE login_failures (
    email_digest  bytea       PRIMARY KEY,
    failures      integer     NOT NULL,
    last_failure  timestamptz NOT NULL,
    blocked_until timestamptz
);
CREATE INDEX login_failures_last_failure_idx ON login_failures (last_failure);
