-- Issue 29.4: a slow receiver costs its own company, not the others. An
-- attempt holds one of the delivery function's few invocations for as long
-- as its receiver takes (up to the attempt timeout), so a company's
-- attempts to slow endpoints are bounded: at most
-- jobboard.WebhookSlowSlots of them at once, the rest put off
-- (internal/postgres/webhook_delivery.go, docs/design.md).

-- Whether the endpoint's last attempt took jobboard.WebhookSlowAttempt or
-- longer (a timeout included). A new endpoint, or one whose URL changed,
-- is slow until an attempt shows otherwise: its first attempts cannot hold
-- every invocation before anything is known of it.
ALTER TABLE webhook_endpoints ADD COLUMN slow boolean NOT NULL DEFAULT true;
GRANT SELECT (slow), UPDATE (slow) ON webhook_endpoints TO jobboard_webhooks;

-- A company's attempts in flight to slow endpoints: lease token → the
-- time the lease ends. An entry is removed when its attempt is recorded,
-- and is ignored once its time has passed (a function that died mid-attempt
-- frees its slot when its lease would have ended).
CREATE TABLE webhook_slow_slots (
    company_id bigint PRIMARY KEY REFERENCES companies (id) ON DELETE CASCADE,
    leases     jsonb  NOT NULL DEFAULT '{}'
);
GRANT SELECT, INSERT, UPDATE ON webhook_slow_slots TO jobboard_webhooks;
