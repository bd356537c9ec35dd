-- Issue 29: what a hostile tenant can make the service do for it is bounded.

-- When the company's members were last told that the endpoint was
-- disabled: the delivery function's statement that disables an endpoint
-- queues the notices only when this is unset or a day old
-- (jobboard.WebhookNoticeInterval), so that enabling an endpoint that
-- answers 410 and pinging it again, in a loop, mails at most once a day.
ALTER TABLE webhook_endpoints ADD COLUMN notified_at timestamptz;
GRANT SELECT (notified_at), UPDATE (notified_at) ON webhook_endpoints TO jobboard_webhooks;

-- The deliveries a company's members dispatch by hand (pings and replays),
-- one row each, counted per endpoint and per company within a window
-- (jobboard.WebhookDispatchPolicy): each is an outbound request to an
-- address a member chose, retried for days. Kept for the window
-- (internal/postgres/retention.go).
CREATE TABLE webhook_dispatches (
    company_id    bigint      NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id   bigint      NOT NULL,
    dispatched_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_dispatches_company_idx ON webhook_dispatches (company_id, dispatched_at);
CREATE INDEX webhook_dispatches_endpoint_idx ON webhook_dispatches (endpoint_id, dispatched_at);

-- A ping while one is pending for the endpoint is that one: this finds it.
CREATE INDEX webhook_deliveries_pending_ping_idx ON webhook_deliveries (endpoint_id)
    WHERE trigger = 'ping' AND state = 'pending';

-- An employer may create at most jobboard.MaxCompaniesPerEmployer
-- companies: counted through this index.
CREATE INDEX companies_created_by_idx ON companies (created_by);
