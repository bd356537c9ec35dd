-- Issue 30: the hot statements of the API as functions, for the modes that
-- send no named prepared statement (exec, what [prod] runs behind RDS
-- Proxy). Sent unnamed, a statement is parsed and planned on every request;
-- the statements of a PL/pgSQL function are planned once per database
-- session and their plans cached there, and a proxy multiplexes clients
-- over its database sessions, so those plans outlive any one client. The
-- client then sends only SELECT * FROM fn($1, ...), cheap to plan.
--
-- Each function is the statement of internal/postgres that it stands for,
-- word for word but for parameter names (the file and constant are named
-- above each); TestProxySafeFunctionsAnswerAsTheirStatements holds each to
-- answering exactly what its statement answers, in every query exec mode.
-- They return rows of named types, whose columns are jobColumns in order
-- (job_row), after the search's version and searchable (job_listing_row):
-- a call of a function that returns a named type is cheaper to plan than
-- one whose RETURNS TABLE PostgreSQL expands from the function's own
-- definition on every call (docs/performance.md).

CREATE TYPE job_row AS (id bigint, company_id bigint, title text, description text,
    location text, remote boolean, employment_type text, salary_min bigint, salary_max bigint,
    salary_currency text, status text, created_at timestamptz, updated_at timestamptz);
CREATE TYPE job_listing_row AS (version bigint, searchable boolean, id bigint,
    company_id bigint, title text, description text, location text, remote boolean,
    employment_type text, salary_min bigint, salary_max bigint, salary_currency text,
    status text, created_at timestamptz, updated_at timestamptz);

-- jobSQL without an actor (openJobSQL, job.go): an open job.
CREATE FUNCTION job_open(p_id bigint)
RETURNS SETOF job_row
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT j.id, j.company_id, j.title, j.description, j.location, j.remote,
        j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
        j.created_at, j.updated_at
    FROM jobs j
    WHERE j.id = p_id AND j.status = 'open';
END
$$;

-- jobSQL (job.go): an open job, or a closed one to a member of its
-- company (p_user) with a live session (p_session).
CREATE FUNCTION job_for_member(p_id bigint, p_user bigint, p_session timestamptz)
RETURNS SETOF job_row
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT j.id, j.company_id, j.title, j.description, j.location, j.remote,
        j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
        j.created_at, j.updated_at
    FROM jobs j
    WHERE j.id = p_id
      AND (j.status = 'open'
           OR EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = p_user)
              AND EXISTS (SELECT 1 FROM users s WHERE s.id = p_user
                          AND (s.password_changed_at IS NULL OR s.password_changed_at <= p_session)));
END
$$;

-- updateJobSQL (job.go): a patch to a job of a company the actor is a
-- member of, with a live session. The parameters are updateJobSQL's $1 to
-- $13 in order.
CREATE FUNCTION update_job(p_id bigint, p_user bigint, p_title text, p_description text,
    p_location text, p_remote boolean, p_employment_type text, p_set_salary boolean,
    p_salary_min bigint, p_salary_max bigint, p_salary_currency text, p_status text,
    p_session timestamptz)
RETURNS SETOF job_row
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY
    UPDATE jobs AS j
    SET title = coalesce(p_title, j.title), description = coalesce(p_description, j.description),
        location = coalesce(p_location, j.location), remote = coalesce(p_remote, j.remote),
        employment_type = coalesce(p_employment_type, j.employment_type),
        salary_min = CASE WHEN p_set_salary THEN p_salary_min ELSE j.salary_min END,
        salary_max = CASE WHEN p_set_salary THEN p_salary_max ELSE j.salary_max END,
        salary_currency = CASE WHEN p_set_salary THEN p_salary_currency ELSE j.salary_currency END,
        status = coalesce(p_status, j.status),
        updated_at = greatest(now(), j.updated_at + interval '1 microsecond')
    WHERE j.id = p_id
      AND EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = p_user)
      AND EXISTS (SELECT 1 FROM users s WHERE s.id = p_user
                  AND (s.password_changed_at IS NULL OR s.password_changed_at <= p_session))
    RETURNING j.id, j.company_id, j.title, j.description, j.location, j.remote,
        j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
        j.created_at, j.updated_at;
END
$$;

-- searchHeaderSQL then searchListingSQL without filters (search_sql.go):
-- the listing version, then a page of p_rows open jobs below p_after
-- (NULL: the first page), newest first. Each branch is a statement of its
-- own, with a plan of its own. An empty page is one row of NULLs beside
-- the version.
CREATE FUNCTION search_open_jobs(p_after bigint, p_rows bigint)
RETURNS SETOF job_listing_row
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v bigint;
BEGIN
    SELECT l.version INTO v FROM job_listing_version l;
    IF p_after IS NULL THEN
        RETURN QUERY
        SELECT v, true, j.id, j.company_id, j.title, j.description, j.location, j.remote,
            j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
            j.created_at, j.updated_at
        FROM jobs j
        WHERE j.status = 'open'
        ORDER BY j.id DESC
        LIMIT p_rows;
    ELSE
        RETURN QUERY
        SELECT v, true, j.id, j.company_id, j.title, j.description, j.location, j.remote,
            j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
            j.created_at, j.updated_at
        FROM jobs j
        WHERE j.status = 'open'
          AND j.id < p_after
        ORDER BY j.id DESC
        LIMIT p_rows;
    END IF;
    IF NOT FOUND THEN
        RETURN QUERY SELECT v, true, NULL::bigint, NULL::bigint, NULL::text, NULL::text,
            NULL::text, NULL::boolean, NULL::text, NULL::bigint, NULL::bigint, NULL::text,
            NULL::text, NULL::timestamptz, NULL::timestamptz;
    END IF;
END
$$;

-- searchHeaderSQL then searchWindowSQL without filters (search_sql.go):
-- the listing version and whether p_query can be searched at all, then
-- the window of a text search: the open jobs with the words among the
-- p_window ids below p_after (NULL: below the newest id the jobs' sequence
-- gave), at most p_rows of them, newest first. An empty page is one row of
-- NULLs beside the version and searchable.
CREATE FUNCTION search_open_jobs_window(p_query text, p_after bigint, p_window bigint, p_rows bigint)
RETURNS SETOF job_listing_row
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v bigint;
    s boolean;
BEGIN
    SELECT l.version, (SELECT querytree(websearch_to_tsquery('english', p_query)) <> 'T')
    INTO v, s FROM job_listing_version l;
    IF p_after IS NULL THEN
        RETURN QUERY
        SELECT v, s, j.id, j.company_id, j.title, j.description, j.location, j.remote,
            j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
            j.created_at, j.updated_at
        FROM jobs j
        WHERE (j.search @@ (SELECT websearch_to_tsquery('english', p_query))) IS TRUE
          AND j.status = 'open'
          AND j.id >= (SELECT last_value + 1 FROM jobs_id_seq) - p_window
        ORDER BY j.id DESC
        LIMIT p_rows;
    ELSE
        RETURN QUERY
        SELECT v, s, j.id, j.company_id, j.title, j.description, j.location, j.remote,
            j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
            j.created_at, j.updated_at
        FROM jobs j
        WHERE (j.search @@ (SELECT websearch_to_tsquery('english', p_query))) IS TRUE
          AND j.status = 'open'
          AND j.id < p_after
          AND j.id >= p_after - p_window
        ORDER BY j.id DESC
        LIMIT p_rows;
    END IF;
    IF NOT FOUND THEN
        RETURN QUERY SELECT v, s, NULL::bigint, NULL::bigint, NULL::text, NULL::text,
            NULL::text, NULL::boolean, NULL::text, NULL::bigint, NULL::bigint, NULL::text,
            NULL::text, NULL::timestamptz, NULL::timestamptz;
    END IF;
END
$$;
