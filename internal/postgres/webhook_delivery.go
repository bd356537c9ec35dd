package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.WebhookAttemptStore = (*DB)(nil)

// The delivery function's statements. They run as the database role
// jobboard_webhooks (migration 008), whose grants are exactly what they
// read and write.

// beginAttemptSQL leases a pending delivery of the dispatch $2 whose
// endpoint is enabled, and loads its event and endpoint as they are now, in
// one statement. When the endpoint is slow it first takes one of the
// company's slow slots (webhook_slow_slots, migration 012): an entry under
// the lease token ($3) until the lease ends, added only while fewer than $5
// unexpired entries are there, which ON CONFLICT DO UPDATE decides on the
// row it has locked, so that two attempts racing for the last slot do not
// both get it; without a slot nothing is leased. No row: see
// attemptStateSQL.
const beginAttemptSQL = `
WITH cand AS (
	SELECT e.company_id, e.slow
	FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
	WHERE d.id = $1 AND d.generation = $2 AND d.state = 'pending'
	  AND (d.lease_until IS NULL OR d.lease_until < now()) AND e.enabled
), slot AS (
	INSERT INTO webhook_slow_slots AS s (company_id, leases)
	SELECT company_id, jsonb_build_object($3::uuid::text, now() + make_interval(secs => $4)) FROM cand WHERE slow
	ON CONFLICT (company_id) DO UPDATE SET leases = (
		SELECT coalesce(jsonb_object_agg(l.key, l.value), '{}') FROM jsonb_each(s.leases) l
		WHERE (l.value #>> '{}')::timestamptz > now()) || excluded.leases
	WHERE (SELECT count(*) FROM jsonb_each(s.leases) l WHERE (l.value #>> '{}')::timestamptz > now()) < $5
	RETURNING 1
), d AS (
	UPDATE webhook_deliveries AS d SET lease_token = $3, lease_until = now() + make_interval(secs => $4)
	WHERE d.id = $1 AND d.generation = $2 AND d.state = 'pending'
	  AND (d.lease_until IS NULL OR d.lease_until < now())
	  AND EXISTS (SELECT 1 FROM cand WHERE NOT cand.slow OR EXISTS (SELECT 1 FROM slot))
	RETURNING d.event_id, d.endpoint_id, d.trigger, d.attempts, d.dispatched_at
)
SELECT d.trigger, d.attempts, d.dispatched_at,
       ev.id::text, ev.type, ev.company_id, ev.job_id, ev.application_id, ev.candidate_id,
       ev.old_status, ev.new_status, ev.endpoint_id, ev.occurred_at,
       e.id, e.url, e.secret, CASE WHEN e.previous_secret_until > now() THEN e.previous_secret END
FROM d
JOIN webhook_events ev ON ev.id = d.event_id
JOIN webhook_endpoints e ON e.id = d.endpoint_id`

// attemptStateSQL says why beginAttemptSQL leased nothing.
const attemptStateSQL = `
SELECT d.generation, d.state, coalesce(d.lease_until > now(), false),
       greatest(coalesce(d.lease_until - now(), '0'), '0'), e.enabled, e.slow
FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.id = $1`

// failDisabledSQL fails a pending delivery of a disabled endpoint.
const failDisabledSQL = `
UPDATE webhook_deliveries SET state = 'failed', failure_reason = 'endpoint_disabled',
	next_attempt_at = NULL, lease_token = NULL, lease_until = NULL
WHERE id = $1 AND generation = $2 AND state = 'pending'`

// BeginWebhookAttempt leases a delivery and loads its event and endpoint
// (see jobboard.WebhookAttemptStore). Errors: database errors.
func (db *DB) BeginWebhookAttempt(ctx context.Context, deliveryID, generation int64, lease time.Duration) (jobboard.WebhookTarget, error) {
	t := jobboard.WebhookTarget{DeliveryID: deliveryID, Generation: generation, Token: uuid.NewString()}
	var (
		jobID, appID, candID, endpoint *int64
		oldStatus, newStatus           *string
	)
	err := db.pool.QueryRow(ctx, beginAttemptSQL, deliveryID, generation, t.Token, lease.Seconds(), jobboard.WebhookSlowSlots).Scan(
		&t.Trigger, &t.Attempts, &t.DispatchedAt,
		&t.Event.ID, &t.Event.Type, &t.Event.CompanyID, &jobID, &appID, &candID,
		&oldStatus, &newStatus, &endpoint, &t.Event.OccurredAt,
		&t.EndpointID, &t.URL, &t.Secret, &t.PreviousSecret)
	switch {
	case err == nil:
		t.CompanyID = t.Event.CompanyID
		t.Event.JobID, t.Event.ApplicationID, t.Event.CandidateID = deref(jobID), deref(appID), deref(candID)
		t.Event.EndpointID = deref(endpoint)
		t.Event.OldStatus = jobboard.ApplicationStatus(deref(oldStatus))
		t.Event.NewStatus = jobboard.ApplicationStatus(deref(newStatus))
		return t, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return jobboard.WebhookTarget{}, fmt.Errorf("begin attempt of webhook delivery %d: %w", deliveryID, err)
	}
	t.Token = ""
	if t.Outcome, t.BusyFor, err = db.attemptState(ctx, deliveryID, generation); err != nil {
		return jobboard.WebhookTarget{}, fmt.Errorf("begin attempt of webhook delivery %d: %w", deliveryID, err)
	}
	return t, nil
}

// attemptState says why a delivery could not be leased; a pending one of a
// disabled endpoint is failed here.
func (db *DB) attemptState(ctx context.Context, deliveryID, generation int64) (string, time.Duration, error) {
	var (
		current  int64
		state    string
		leased   bool
		left     time.Duration
		enabled  bool
		slow     bool
		disabled bool
	)
	err := db.pool.QueryRow(ctx, attemptStateSQL, deliveryID).Scan(&current, &state, &leased, &left, &enabled, &slow)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return jobboard.TargetMissing, 0, nil
	case err != nil:
		return "", 0, err
	case current != generation:
		return jobboard.TargetStale, 0, nil
	case state != jobboard.DeliveryPending:
		return jobboard.TargetDone, 0, nil
	case !enabled:
		disabled = true
	case leased:
		return jobboard.TargetBusy, left, nil
	case slow:
		// Leasable, but no slow slot of its company was free.
		return jobboard.TargetDeferred, 0, nil
	default:
		// The lease ended or the endpoint was enabled between the two
		// statements: busy for no time, so the caller retries soon.
		return jobboard.TargetBusy, 0, nil
	}
	if disabled {
		if _, err := db.pool.Exec(ctx, failDisabledSQL, deliveryID, generation); err != nil {
			return "", 0, err
		}
	}
	return jobboard.TargetDisabled, 0, nil
}

// finishAttemptSQL logs an attempt and updates its delivery, when the
// token still holds it, and frees the company's slow slot that the lease
// token holds, if any; %s is the endpoint's part (endpointSucceededSQL or
// endpointFailedSQL), which also queues the emails of an endpoint it
// disables. It returns whether the delivery was updated, and whether and
// why the endpoint was disabled.
const finishAttemptSQL = `
WITH att AS (
	INSERT INTO webhook_attempts (delivery_id, generation, trigger, attempted_at, status_code, latency_ms,
	                              error, response_body, response_truncated)
	SELECT $1, $2, $4, $5, $6, $7, $8, $9, $10
	WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1)
), del AS (
	UPDATE webhook_deliveries AS d SET
		state = $11, failure_reason = $12, attempts = d.attempts + 1, next_attempt_at = $13,
		delivered_at = CASE WHEN $11 = 'delivered' THEN $5::timestamptz END,
		lease_token = NULL, lease_until = NULL
	WHERE d.id = $1 AND d.generation = $2 AND d.lease_token = $3
	RETURNING d.id
), slot AS (
	UPDATE webhook_slow_slots AS s SET leases = s.leases - $3::uuid::text
	WHERE s.company_id = (SELECT company_id FROM webhook_endpoints WHERE id = $14) AND s.leases ? $3::uuid::text
), %s
SELECT EXISTS (SELECT 1 FROM del), coalesce((SELECT NOT enabled FROM ep), false), (SELECT disabled_reason FROM ep)`

// endpointSucceededSQL clears the endpoint's failure record ($14 the
// endpoint) and notes whether it is slow ($15); it writes nothing to a
// healthy endpoint whose speed is unchanged.
const endpointSucceededSQL = `ep AS (
	UPDATE webhook_endpoints AS e SET failing_since = NULL, slow = $15
	WHERE e.id = $14 AND (e.failing_since IS NOT NULL OR e.slow <> $15)
	RETURNING e.enabled, NULL::text AS disabled_reason
)`

// endpointFailedSQL starts the endpoint's failure record at the attempt
// ($5), notes whether it is slow ($15), and disables the endpoint when it
// answered 410 ($16) or has failed for $17 seconds; it writes nothing when
// nothing changes. An endpoint it
// disables gets one webhook.endpoint_disabled outbox row per member of its
// company, with ids derived from the endpoint, the member and the time, so
// a retried statement queues each email once; but only when its members
// were not told within $18 seconds (notified_at): a member can enable an
// endpoint that answers 410 and ping it again at will, and each disabling
// must not be another email to the members' addresses. (Whether a member
// is emailed at all, the worker's claim decides: verified addresses only,
// webhook_notice.go.)
const endpointFailedSQL = `ep AS (
	UPDATE webhook_endpoints AS e SET
		slow = $15,
		failing_since = coalesce(e.failing_since, $5),
		enabled = NOT ($16 OR coalesce(e.failing_since, $5) <= now() - make_interval(secs => $17)),
		disabled_reason = CASE WHEN $16 THEN 'gone'
		                       WHEN coalesce(e.failing_since, $5) <= now() - make_interval(secs => $17) THEN 'failing' END,
		disabled_at = CASE WHEN $16 OR coalesce(e.failing_since, $5) <= now() - make_interval(secs => $17) THEN now() END,
		notified_at = CASE WHEN ($16 OR coalesce(e.failing_since, $5) <= now() - make_interval(secs => $17))
		                        AND (e.notified_at IS NULL OR e.notified_at <= now() - make_interval(secs => $18))
		                   THEN now() ELSE e.notified_at END
	WHERE e.id = $14 AND e.enabled
	  AND (e.failing_since IS NULL OR e.slow <> $15 OR $16 OR e.failing_since <= now() - make_interval(secs => $17))
	RETURNING e.company_id, e.enabled, e.disabled_reason, e.disabled_at, e.notified_at = now() AS notify
), notice AS (
	INSERT INTO outbox (event_id, event_type, payload, created_at)
	SELECT n.id, 'webhook.endpoint_disabled',
	       jsonb_build_object('type', 'webhook.endpoint_disabled', 'event_id', n.id, 'occurred_at', ep.disabled_at,
	                          'user_id', m.user_id, 'endpoint_id', $14::bigint, 'company_id', ep.company_id,
	                          'reason', ep.disabled_reason),
	       now()
	FROM ep
	JOIN company_members m ON m.company_id = ep.company_id
	CROSS JOIN LATERAL (SELECT md5('webhook-disabled:' || $14 || ':' || m.user_id || ':' || ep.disabled_at)::uuid AS id) n
	WHERE NOT ep.enabled AND ep.notify
)`

var (
	finishSucceededSQL = fmt.Sprintf(finishAttemptSQL, endpointSucceededSQL)
	finishFailedSQL    = fmt.Sprintf(finishAttemptSQL, endpointFailedSQL)
)

// FinishWebhookAttempt records an attempt and what it decided (see
// jobboard.WebhookAttemptStore). Errors: database errors.
func (db *DB) FinishWebhookAttempt(ctx context.Context, r jobboard.WebhookAttemptRecord) (jobboard.WebhookAttemptOutcome, error) {
	a := r.Attempt
	var reason *string
	if r.FailureReason != "" {
		reason = &r.FailureReason
	}
	args := []any{r.DeliveryID, r.Generation, r.Token, r.Trigger, a.AttemptedAt, a.StatusCode, a.LatencyMS,
		nullIfEmpty(a.Error), nullIfEmpty(a.ResponseBody), a.ResponseTruncated,
		r.State, reason, r.NextAttemptAt, r.EndpointID, r.Slow}
	sql := finishSucceededSQL
	if r.State != jobboard.DeliveryDelivered {
		sql = finishFailedSQL
		args = append(args, r.Gone, r.DisableAfter.Seconds(), jobboard.WebhookNoticeInterval.Seconds())
	}
	var (
		o        jobboard.WebhookAttemptOutcome
		updated  bool
		disabled *string
	)
	if err := db.pool.QueryRow(ctx, sql, args...).Scan(&updated, &o.Disabled, &disabled); err != nil {
		return jobboard.WebhookAttemptOutcome{}, fmt.Errorf("record attempt of webhook delivery %d: %w", r.DeliveryID, err)
	}
	o.LeaseLost = !updated
	o.DisabledReason = deref(disabled)
	return o, nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// webhookBacklogSQL measures the delivery log, through the partial index
// webhook_deliveries_unattempted_idx for the oldest.
const webhookBacklogSQL = `
SELECT (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'),
       coalesce((SELECT now() - min(dispatched_at) FROM webhook_deliveries WHERE state = 'pending' AND attempts = 0), '0'),
       (SELECT count(*) FROM webhook_endpoints WHERE NOT enabled AND disabled_reason IN ('gone', 'failing'))`

// WebhookBacklog measures the delivery log. Errors: database errors.
func (db *DB) WebhookBacklog(ctx context.Context) (jobboard.WebhookBacklog, error) {
	var b jobboard.WebhookBacklog
	if err := db.pool.QueryRow(ctx, webhookBacklogSQL).Scan(&b.Pending, &b.OldestUnattempted, &b.DisabledEndpoints); err != nil {
		return jobboard.WebhookBacklog{}, fmt.Errorf("webhook backlog: %w", err)
	}
	return b, nil
}

// WebhookRole is the database role of the delivery function (migration
// 008).
const WebhookRole = "jobboard_webhooks"

// SessionRole makes every connection of the pool take role as its session
// role (the run-time parameter role, sent when the connection opens), so
// that its statements run with exactly role's privileges. The user that
// logs in must be a member of role. An option for Open.
func SessionRole(role string) func(*pgxpool.Config) {
	return func(cfg *pgxpool.Config) {
		if cfg.ConnConfig.RuntimeParams == nil {
			cfg.ConnConfig.RuntimeParams = map[string]string{}
		}
		cfg.ConnConfig.RuntimeParams["role"] = role
	}
}
