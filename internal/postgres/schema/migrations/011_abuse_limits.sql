-- Issue 29: what a hostile tenant can make the service do for it is bounded.

-- When the company's members were last told that the endpoint was
-- disabled: the delivery function's statement that disables an endpoint
-- queues the notices only when this is unset or a day old
-- (jobboard.WebhookNoticeInterval), so that enabling an endpoint that
-- answers 410 and pinging it again, in a loop, mails at most once a day.
ALTER TABLE webhook_endpoints ADD COLUMN notified_at timestamptz;
GRANT SELECT (notified_at), UPDATE (notified_at) ON webhook_endpoints TO jobboard_webhooks;
