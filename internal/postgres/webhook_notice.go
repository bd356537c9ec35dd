package postgres

import "github.com/jobboard/jobboard/internal/jobboard"

// The claim of a webhook.endpoint_disabled event: the member ($6) the
// email goes to, when the member has verified the address. Its text is
// fixed (ids and a reason), but anyone can register an account with
// someone else's address, make a company and an endpoint that answers
// 410: an unverified address would be a way to mail any inbox from our
// domain. So an unverified member's claim finishes as
// recipient_unverified (the company's page shows the endpoint disabled
// all the same), as a status email's does; an account that is gone
// finishes it as user_missing.
const (
	webhookNoticeTargetSQL = `
WITH target AS (
	SELECT u.id, u.email, u.email_verified_at IS NOT NULL AS verified FROM users u WHERE u.id = $6
), decided AS (
	SELECT CASE WHEN t.id IS NULL THEN 'user_missing'
	            WHEN NOT t.verified THEN 'recipient_unverified' END AS outcome
	FROM (SELECT) AS one LEFT JOIN target t ON true
), claim AS (`

	webhookNoticeClaimedSQL = `
)
SELECT claim.attempts, claim.outcome, NULL::bigint, NULL::text, t.email, NULL::text, NULL::text, NULL::text,
       t.id, NULL::timestamptz, NULL::interval, NULL::timestamptz
FROM claim LEFT JOIN target t ON true`
)

func init() {
	claimStatements[jobboard.EventTypeWebhookEndpointDisabled] = struct{ claimNew, takeOver string }{
		webhookNoticeTargetSQL + insertClaimSQL + webhookNoticeClaimedSQL,
		webhookNoticeTargetSQL + takeOverClaimSQL + webhookNoticeClaimedSQL,
	}
}
