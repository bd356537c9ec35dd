package jobboard

import "time"

// The bounds on what one account, address, company or endpoint can make
// the service do, stated here once (docs/api.md, "Limits and busy
// answers", lists them for clients).

// WebhookNoticeInterval is how often, at most, the members of a company
// are emailed that one of its webhook endpoints was disabled: a member may
// enable an endpoint that answers 410 Gone and ping it again at will, and
// each disabling must not be another email. Only members whose address is
// verified are emailed at all.
const WebhookNoticeInterval = 24 * time.Hour
