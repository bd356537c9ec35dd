package jobboard

import "time"

// The bounds on what one account, address, client, company or endpoint can
// make the service do, stated here once; docs/api.md ("Limits and busy
// answers") lists them for clients. (The sizes of input fields stay beside
// their types.)

// DefaultLoginPolicy counts the failed logins to one account from one
// client: five failures, then blocks of 1 s, 2 s, 4 s ... up to 15 minutes;
// a day without failures forgets them. Someone who knows an address can
// block only their own client's attempts at it, not its owner's elsewhere.
var DefaultLoginPolicy = LoginPolicy{FreeAttempts: 5, BaseDelay: time.Second, MaxDelay: 15 * time.Minute, ResetAfter: 24 * time.Hour}

// DefaultClientPolicy counts the failures of one client across every
// account (one password sprayed over many addresses, or addresses probed by
// registering them): twenty, then blocks of 1 s doubling up to 15 minutes;
// an hour without failures forgets them. Looser than DefaultLoginPolicy,
// since many people may share a client address (a NAT); a success takes
// back its own attempt but does not forget the others'.
var DefaultClientPolicy = LoginPolicy{FreeAttempts: 20, BaseDelay: time.Second, MaxDelay: 15 * time.Minute, ResetAfter: time.Hour}

// DefaultVerificationPolicy is a minute between resends, at most five per
// hour for an account and for an address.
var DefaultVerificationPolicy = VerificationPolicy{
	Cooldown: time.Minute, Window: time.Hour, PerAccount: 5, PerAddress: 5,
}

// DefaultPasswordResetPolicy bounds the reset emails as
// DefaultVerificationPolicy bounds the verification emails: one a minute,
// five an hour. They are counted per address only: an account has exactly
// one address, so the address's bounds are the account's too, and a bound
// counted per account would refuse requests for addresses that have an
// account and not for the others, which would tell them apart.
var DefaultPasswordResetPolicy = DefaultVerificationPolicy

// MaxCompaniesPerEmployer is the most companies one employer may create
// (409 too-many-companies): each company may have MaxWebhookEndpoints
// endpoints and dispatch DefaultWebhookDispatchPolicy's deliveries, so
// without it the company bounds would bound nothing.
const MaxCompaniesPerEmployer = 10

// MaxWebhookEndpoints is the most endpoints one company may have (409
// too-many-webhook-endpoints).
const MaxWebhookEndpoints = 20

// WebhookDispatchPolicy bounds the deliveries a company's members dispatch
// by hand, pings and replays together: at most PerEndpoint to one endpoint
// and PerCompany to all of a company's endpoints within Window (429
// too-many-webhook-dispatches with Retry-After beyond that). Each is an
// outbound request from our addresses to one a member chose, retried for
// days when it fails. A ping while one is pending for the endpoint is that
// one (the answer is the pending delivery) and counts nothing.
type WebhookDispatchPolicy struct {
	Window      time.Duration
	PerEndpoint int
	PerCompany  int
}

// DefaultWebhookDispatchPolicy is 20 an hour per endpoint, 60 an hour per
// company: plenty to set up and debug a receiver.
var DefaultWebhookDispatchPolicy = WebhookDispatchPolicy{Window: time.Hour, PerEndpoint: 20, PerCompany: 60}

// WebhookDispatchHistory is what the store knows of an endpoint's and its
// company's dispatches within the policy's window: how many, and the
// oldest of each.
type WebhookDispatchHistory struct {
	EndpointCount  int
	EndpointOldest time.Time
	CompanyCount   int
	CompanyOldest  time.Time
}

// Wait returns how long, at now, the next dispatch must wait, and which
// bound says so ("" when it need not wait): until the oldest dispatch
// counted against a full bound leaves the window.
func (p WebhookDispatchPolicy) Wait(h WebhookDispatchHistory, now time.Time) (time.Duration, string) {
	var (
		wait  time.Duration
		bound string
	)
	consider := func(count, limit int, oldest time.Time, name string) {
		if count < limit {
			return
		}
		// At least a moment: a full bound never answers "go ahead".
		if d := max(oldest.Add(p.Window).Sub(now), time.Millisecond); d > wait {
			wait, bound = d, name
		}
	}
	consider(h.EndpointCount, p.PerEndpoint, h.EndpointOldest, "endpoint")
	consider(h.CompanyCount, p.PerCompany, h.CompanyOldest, "company")
	return wait, bound
}

// WebhookNoticeInterval is how often, at most, the members of a company
// are emailed that one of its webhook endpoints was disabled: a member may
// enable an endpoint that answers 410 Gone and ping it again at will, and
// each disabling must not be another email. Only members whose address is
// verified are emailed at all.
const WebhookNoticeInterval = 24 * time.Hour

// WebhookSlowAttempt is how long an attempt may take before its endpoint
// counts as slow (a timeout always does). Receivers should answer at once
// and work later (docs/webhooks.md).
const WebhookSlowAttempt = time.Second

// WebhookSlowSlots is how many attempts to slow endpoints a company may
// have in flight at once. An attempt holds one of the delivery function's
// invocations (WebhookMaximumConcurrency, at least 2) for as long as its
// receiver takes, so one: a company whose receivers are slow holds at most
// one invocation, and the others go on serving every other company. Its
// further deliveries are put off (TargetDeferred).
const WebhookSlowSlots = 1
