package jobboard

import (
	"context"
	"time"
)

// What BeginWebhookAttempt found when there is nothing to attempt
// (WebhookTarget.Outcome). None of them is retried.
const (
	// TargetMissing: the delivery is gone (its endpoint was deleted, or the
	// retention removed it).
	TargetMissing = "delivery_missing"
	// TargetStale: a replay started a newer dispatch; its own message
	// attempts it.
	TargetStale = "stale_dispatch"
	// TargetDone: delivered or failed already (a duplicate message).
	TargetDone = "already_done"
	// TargetDisabled: the endpoint is disabled; the delivery is now failed
	// (FailureEndpointDisabled) and can be replayed once it is enabled.
	TargetDisabled = "endpoint_disabled"
	// TargetBusy: another attempt holds the lease; retry after BusyFor.
	TargetBusy = "busy"
	// TargetDeferred: the endpoint is slow and its company has
	// WebhookSlowSlots attempts to slow endpoints in flight; try later.
	TargetDeferred = "deferred"
)

// WebhookTarget is what the delivery function needs for one attempt: the
// delivery with its lease, its event and its endpoint as they are now (a
// changed URL, a rotated secret or a disabled endpoint take effect at the
// next attempt).
type WebhookTarget struct {
	// Outcome is empty when the attempt is this caller's to make.
	Outcome string
	// BusyFor is, for TargetBusy, how long the other lease has left.
	BusyFor time.Duration

	DeliveryID int64
	Generation int64
	// Token is the lease's; FinishWebhookAttempt needs it.
	Token string
	// Trigger is what dispatched it: "event", "replay" or "ping".
	Trigger string
	// Attempts counts the attempts of this dispatch before this one.
	Attempts     int
	DispatchedAt time.Time
	Event        WebhookEvent
	EndpointID   int64
	CompanyID    int64
	URL          string
	// Secret and PreviousSecret are sealed (SecretSealer, under
	// WebhookSecretContext(CompanyID)); PreviousSecret is nil unless it
	// still signs.
	Secret         []byte
	PreviousSecret []byte
}

// WebhookAttemptRecord is one finished attempt and what it decided.
type WebhookAttemptRecord struct {
	DeliveryID int64
	Generation int64
	Token      string
	Trigger    string
	EndpointID int64
	Attempt    WebhookAttempt
	// State is the delivery's state after the attempt: DeliveryDelivered,
	// DeliveryPending (NextAttemptAt says when) or DeliveryFailed
	// (FailureReason says why).
	State         string
	FailureReason string
	NextAttemptAt *time.Time
	// Gone disables the endpoint (it answered 410).
	Gone bool
	// DisableAfter disables an endpoint whose attempts have all failed for
	// this long, this one included.
	DisableAfter time.Duration
	// Slow: the attempt took WebhookSlowAttempt or longer; the endpoint
	// is slow until an attempt is not.
	Slow bool
}

// WebhookAttemptOutcome is what recording an attempt did.
type WebhookAttemptOutcome struct {
	// LeaseLost: the delivery was not updated, since the token no longer
	// holds it (a replay reset it, or the lease ran out and another
	// attempt took it). The attempt is logged regardless.
	LeaseLost bool
	// Disabled: the endpoint was disabled by this attempt (DisabledReason
	// says why); its company's members are told by email.
	Disabled       bool
	DisabledReason string
}

// WebhookAttemptStore is the delivery function's access to the database,
// and all of it (its database role has no other privileges): lease a
// delivery with its event and endpoint, then record the attempt.
type WebhookAttemptStore interface {
	// BeginWebhookAttempt leases the delivery of a dispatch for lease and
	// loads what the attempt needs. A disabled endpoint fails the delivery
	// at once (TargetDisabled). Errors: database errors.
	BeginWebhookAttempt(ctx context.Context, deliveryID, generation int64, lease time.Duration) (WebhookTarget, error)
	// FinishWebhookAttempt logs the attempt, updates the delivery (if the
	// token still holds it) and the endpoint's failure record, disabling
	// it when the record says so, with the emails to its company's
	// members, in one statement. Errors: database errors (nothing is
	// recorded then).
	FinishWebhookAttempt(ctx context.Context, r WebhookAttemptRecord) (WebhookAttemptOutcome, error)
}

// WebhookBacklog is what the delivery log holds that is not done.
type WebhookBacklog struct {
	// Pending counts the pending deliveries, retrying ones included.
	Pending int64
	// OldestUnattempted is the age of the oldest pending delivery not yet
	// attempted at all (zero when none): a measure of the pipeline itself,
	// which receivers that fail cannot move.
	OldestUnattempted time.Duration
	// DisabledEndpoints counts the endpoints disabled by failures (410 or
	// days of failing), not by their members.
	DisabledEndpoints int64
}
