-- Signed webhooks for employers (docs/webhooks.md, docs/design.md).
--
-- A company's endpoints. The signing secrets are sealed (AES-256-GCM under
-- a key that the database does not hold, bound to the company): a copy of
-- the database reveals none. previous_secret signs beside secret until
-- previous_secret_until, the overlap of a rotation. failing_since is the
-- first failed attempt since the last success; an endpoint that keeps
-- failing for three days is disabled.
CREATE TABLE webhook_endpoints (
    id                    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id            bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    url                   text        NOT NULL,
    description           text        NOT NULL DEFAULT '',
    event_types           text[]      NOT NULL,
    enabled               boolean     NOT NULL DEFAULT true,
    disabled_reason       text CHECK (disabled_reason IN ('disabled_by_member', 'gone', 'failing')),
    disabled_at           timestamptz,
    failing_since         timestamptz,
    secret                bytea       NOT NULL,
    previous_secret       bytea,
    previous_secret_until timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_company_idx ON webhook_endpoints (company_id, id);
-- The write paths (apply, status change, job closed) look up the enabled
-- endpoints of the company in the statement of the change: a company
-- without any finds nothing here, at the cost of one index probe.
CREATE INDEX webhook_endpoints_enabled_idx ON webhook_endpoints (company_id) WHERE enabled;

-- What happened, written in the transaction of the change when at least
-- one enabled endpoint of the company subscribes to its type. Its id is
-- the webhook-id of every delivery of it. No foreign keys to the job or
-- application: the event records what was, and outlives them.
CREATE TABLE webhook_events (
    id             uuid        PRIMARY KEY,
    company_id     bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    type           text        NOT NULL,
    job_id         bigint,
    application_id bigint,
    candidate_id   bigint,
    old_status     text,
    new_status     text,
    endpoint_id    bigint,
    occurred_at    timestamptz NOT NULL
);
CREATE INDEX webhook_events_occurred_idx ON webhook_events (occurred_at);

-- One event for one endpoint. generation counts the dispatches (the first,
-- then each replay); a queue message names the generation it was sent for,
-- so that a message of an earlier dispatch finds nothing to do. The lease
-- keeps two delivery functions from attempting one delivery at once.
CREATE TABLE webhook_deliveries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id        uuid        NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    endpoint_id     bigint      NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    state           text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    failure_reason  text,
    generation      bigint      NOT NULL DEFAULT 1,
    trigger         text        NOT NULL DEFAULT 'event' CHECK (trigger IN ('event', 'replay', 'ping')),
    attempts        int         NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    dispatched_at   timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz,
    delivered_at    timestamptz,
    lease_token     uuid,
    lease_until     timestamptz,
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id);
-- The sweeper's metric of the pipeline's own health: dispatched deliveries
-- not attempted yet.
CREATE INDEX webhook_deliveries_unattempted_idx ON webhook_deliveries (dispatched_at)
    WHERE state = 'pending' AND attempts = 0;

-- The delivery log: every HTTP attempt, with the start of the answer.
CREATE TABLE webhook_attempts (
    id                 bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id        bigint      NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    generation         bigint      NOT NULL,
    trigger            text        NOT NULL,
    attempted_at       timestamptz NOT NULL,
    status_code        int,
    latency_ms         bigint      NOT NULL,
    error              text,
    response_body      text,
    response_truncated boolean     NOT NULL DEFAULT false
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, id);

-- The delivery function's database role: it reads a delivery with its
-- event and endpoint, records attempts, disables a failing endpoint and
-- queues the emails that tell the company's members. Nothing else: no
-- users, applications, jobs, companies, claims or keys. It logs in as a
-- role that is a member of this one (docs/deploying.md), or sets it as
-- its session role. Creating it needs CREATEROLE, which the migrating
-- user has on RDS; a migrating user without it must find the role made
-- already.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'jobboard_webhooks') THEN
        CREATE ROLE jobboard_webhooks NOLOGIN;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN
        NULL; -- made meanwhile by the migration of another database of the server
    WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'role jobboard_webhooks does not exist and % may not create it', current_user
            USING HINT = 'As an administrator: CREATE ROLE jobboard_webhooks NOLOGIN; then migrate again (docs/deploying.md).';
END
$$;
GRANT SELECT (id, company_id, url, enabled, disabled_reason, disabled_at, failing_since,
                secret, previous_secret, previous_secret_until)
    ON webhook_endpoints TO jobboard_webhooks;
GRANT UPDATE (enabled, disabled_reason, disabled_at, failing_since)
    ON webhook_endpoints TO jobboard_webhooks;
GRANT SELECT ON webhook_events TO jobboard_webhooks;
GRANT SELECT, UPDATE (state, failure_reason, attempts, next_attempt_at, delivered_at, lease_token, lease_until)
    ON webhook_deliveries TO jobboard_webhooks;
GRANT INSERT ON webhook_attempts TO jobboard_webhooks;
GRANT SELECT (company_id, user_id) ON company_members TO jobboard_webhooks;
GRANT INSERT ON outbox TO jobboard_webhooks;
