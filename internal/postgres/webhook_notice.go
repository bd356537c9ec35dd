package postgres

import "github.com/jobboard/jobboard/internal/jobboard"

// The claim of a webhook.endpoint_disabled event: the member ($6) the
// email goes to. Its text is fixed (ids and a reason), so it goes to the
// address the account has, verified or not; an account that is gone
// finishes the claim as user_missing.
const (
	webhookNoticeTargetSQL = `
WITH target AS (
	SELECT u.id, u.email FROM users u WHERE u.id = $6
), decided AS (
	SELECT CASE WHEN t.id IS NULL THEN 'user_missing' END AS outcome
	FROM (SELECT) AS one LEFT JOIN target t ON true
), claim AS (`

	webhookNoticeClaimedSQL = `
)
SELECT claim.attempts, claim.outcome, NULL::bigint, NULL::text, t.email, NULL::text, NULL::text, NULL::text,
       t.id, NULL::timestamptz, NULL::interval
FROM claim LEFT JOIN target t ON true`
)

func init() {
	claimStatements[jobboard.EventTypeWebhookEndpointDisabled] = struct{ claimNew, takeOver string }{
		webhookNoticeTargetSQL + insertClaimSQL + webhookNoticeClaimedSQL,
		webhookNoticeTargetSQL + takeOverClaimSQL + webhookNoticeClaimedSQL,
	}
}
