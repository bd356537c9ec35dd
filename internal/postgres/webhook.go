package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.WebhookStore = (*DB)(nil)

// webhookMember is the condition that actor $2 is a member of company $1,
// with a live session (the parameter changed, as liveSession takes it):
// every statement of a company's webhooks carries it, so that whoever is
// not a member finds nothing (404) rather than being told no (403), and a
// session that has ended finds nothing either (refusal tells it apart).
func webhookMember(changed string) string {
	return `EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = $1 AND m.user_id = $2)
  AND ` + liveSession("$2", changed)
}

// endpointColumns is the column list that scanEndpoint reads, in order. The
// previous secret's expiry is shown only while it signs.
const endpointColumns = `e.id, e.company_id, e.url, e.description, e.event_types, e.enabled,
	e.disabled_reason, e.disabled_at, e.failing_since,
	CASE WHEN e.previous_secret_until > now() THEN e.previous_secret_until END,
	e.created_at, e.updated_at`

func scanEndpoint(row pgx.CollectableRow) (jobboard.WebhookEndpoint, error) {
	var (
		e      jobboard.WebhookEndpoint
		reason *string
	)
	err := row.Scan(&e.ID, &e.CompanyID, &e.URL, &e.Description, &e.EventTypes, &e.Enabled,
		&reason, &e.DisabledAt, &e.FailingSince, &e.PreviousSecretExpiresAt, &e.CreatedAt, &e.UpdatedAt)
	if reason != nil {
		e.DisabledReason = *reason
	}
	return e, err
}

// lockCompanyEndpointsSQL locks the company's row for the rest of the
// transaction (FOR NO KEY UPDATE: jobs and members may still be added),
// so that two creations count the endpoints one after the other, and two
// dispatches the company's dispatches (dispatch). No row: no such
// company, the actor is not a member, or their session ($3) has ended.
var lockCompanyEndpointsSQL = `
SELECT c.id FROM companies c
WHERE c.id = $1 AND ` + webhookMember("$3") + `
FOR NO KEY UPDATE OF c`

const countEndpointsSQL = `SELECT count(*) FROM webhook_endpoints WHERE company_id = $1`

const createEndpointSQL = `
INSERT INTO webhook_endpoints AS e (company_id, url, description, event_types, enabled, disabled_reason, disabled_at, secret)
VALUES ($1, $2, $3, $4, $5, CASE WHEN NOT $5 THEN 'disabled_by_member' END, CASE WHEN NOT $5 THEN now() END, $6)
RETURNING ` + endpointColumns

// CreateWebhookEndpoint stores an endpoint of the company with its sealed
// secret (see jobboard.WebhookStore). Errors: jobboard.ErrNotFound,
// jobboard.ErrTooManyWebhookEndpoints, jobboard.ErrSessionRevoked.
func (u *unit) CreateWebhookEndpoint(ctx context.Context, actor jobboard.Actor, companyID int64, n jobboard.NewWebhookEndpoint, sealedSecret []byte) (jobboard.WebhookEndpoint, error) {
	enabled := n.Enabled == nil || *n.Enabled
	var e jobboard.WebhookEndpoint
	err := u.inTx(ctx, func(tx pgx.Tx) error {
		var id, count int64
		err := tx.QueryRow(ctx, lockCompanyEndpointsSQL, companyID, actor.UserID, actor.PasswordChangedAt).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return refusal(ctx, tx, actor, jobboard.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, countEndpointsSQL, companyID).Scan(&count); err != nil {
			return err
		}
		if count >= jobboard.MaxWebhookEndpoints {
			return jobboard.ErrTooManyWebhookEndpoints
		}
		rows, _ := tx.Query(ctx, createEndpointSQL, companyID, n.URL, n.Description, n.EventTypes, enabled, sealedSecret)
		e, err = pgx.CollectExactlyOneRow(rows, scanEndpoint)
		return err
	})
	if err != nil {
		return jobboard.WebhookEndpoint{}, fmt.Errorf("create webhook endpoint of company %d: %w", companyID, timeout(ctx, err))
	}
	return e, nil
}

var endpointsSQL = `
SELECT ` + endpointColumns + `
FROM webhook_endpoints e
WHERE e.company_id = $1 AND ` + webhookMember("$3") + `
ORDER BY e.id`

// companyVisibleSQL tells whether actor $2, whose session ($3) is live, is
// a member of company $1.
var companyVisibleSQL = `SELECT ` + webhookMember("$3")

// WebhookEndpoints lists the company's endpoints to a member. Errors:
// jobboard.ErrNotFound, jobboard.ErrSessionRevoked.
func (db *DB) WebhookEndpoints(ctx context.Context, actor jobboard.Actor, companyID int64) ([]jobboard.WebhookEndpoint, error) {
	rows, _ := db.pool.Query(ctx, endpointsSQL, companyID, actor.UserID, actor.PasswordChangedAt)
	es, err := pgx.CollectRows(rows, scanEndpoint)
	if err == nil && len(es) == 0 {
		err = db.requireMember(ctx, actor, companyID)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook endpoints of company %d: %w", companyID, timeout(ctx, err))
	}
	return es, nil
}

// requireMember returns jobboard.ErrNotFound unless the actor is a member
// of the company, jobboard.ErrSessionRevoked when their session has ended:
// what an empty answer means when it may be either.
func (db *DB) requireMember(ctx context.Context, actor jobboard.Actor, companyID int64) error {
	var member bool
	if err := db.pool.QueryRow(ctx, companyVisibleSQL, companyID, actor.UserID, actor.PasswordChangedAt).Scan(&member); err != nil {
		return err
	}
	if !member {
		return refusal(ctx, db.pool, actor, jobboard.ErrNotFound)
	}
	return nil
}

var endpointSQL = `
SELECT ` + endpointColumns + `
FROM webhook_endpoints e
WHERE e.id = $3 AND e.company_id = $1 AND ` + webhookMember("$4")

// WebhookEndpoint returns one endpoint of the company to a member. Errors:
// jobboard.ErrNotFound, jobboard.ErrSessionRevoked.
func (db *DB) WebhookEndpoint(ctx context.Context, actor jobboard.Actor, companyID, id int64) (jobboard.WebhookEndpoint, error) {
	rows, _ := db.pool.Query(ctx, endpointSQL, companyID, actor.UserID, id, actor.PasswordChangedAt)
	e, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		err = refusal(ctx, db.pool, actor, jobboard.ErrNotFound)
	}
	if err != nil {
		return jobboard.WebhookEndpoint{}, fmt.Errorf("webhook endpoint %d: %w", id, timeout(ctx, err))
	}
	return e, nil
}

// updateEndpointSQL applies a patch in one statement: a NULL parameter
// leaves its column. Disabling records who and when; enabling a disabled
// endpoint clears that and its failure record, so that it gets three more
// days before it is disabled again. A new URL is slow until an attempt
// shows otherwise (migration 012). $8 is the actor's session.
var updateEndpointSQL = `
UPDATE webhook_endpoints AS e SET
	url = coalesce($4, e.url),
	description = coalesce($5, e.description),
	event_types = coalesce($6, e.event_types),
	enabled = coalesce($7, e.enabled),
	disabled_reason = CASE WHEN $7 IS NULL OR $7 = e.enabled THEN e.disabled_reason
	                       WHEN $7 THEN NULL ELSE 'disabled_by_member' END,
	disabled_at = CASE WHEN $7 IS NULL OR $7 = e.enabled THEN e.disabled_at
	                   WHEN $7 THEN NULL ELSE now() END,
	failing_since = CASE WHEN $7 AND NOT e.enabled THEN NULL ELSE e.failing_since END,
	slow = e.slow OR $4 IS DISTINCT FROM NULL AND $4 <> e.url,
	updated_at = now()
WHERE e.id = $3 AND e.company_id = $1 AND ` + webhookMember("$8") + `
RETURNING ` + endpointColumns

// UpdateWebhookEndpoint applies a patch to an endpoint of the company.
// Errors: jobboard.ErrNotFound, jobboard.ErrSessionRevoked.
func (u *unit) UpdateWebhookEndpoint(ctx context.Context, actor jobboard.Actor, companyID, id int64, p jobboard.WebhookEndpointPatch) (jobboard.WebhookEndpoint, error) {
	q, err := u.writer(ctx)
	if err != nil {
		return jobboard.WebhookEndpoint{}, fmt.Errorf("update webhook endpoint %d: %w", id, err)
	}
	rows, _ := q.Query(ctx, updateEndpointSQL, companyID, actor.UserID, id, p.URL, p.Description, p.EventTypes, p.Enabled, actor.PasswordChangedAt)
	e, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		err = refusal(ctx, q, actor, jobboard.ErrNotFound)
	}
	if err != nil {
		return jobboard.WebhookEndpoint{}, fmt.Errorf("update webhook endpoint %d: %w", id, timeout(ctx, err))
	}
	return e, nil
}

var deleteEndpointSQL = `
DELETE FROM webhook_endpoints e
WHERE e.id = $3 AND e.company_id = $1 AND ` + webhookMember("$4")

// DeleteWebhookEndpoint deletes an endpoint of the company with its
// deliveries and their attempts. Errors: jobboard.ErrNotFound,
// jobboard.ErrSessionRevoked.
func (u *unit) DeleteWebhookEndpoint(ctx context.Context, actor jobboard.Actor, companyID, id int64) error {
	q, err := u.writer(ctx)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %d: %w", id, err)
	}
	tag, err := q.Exec(ctx, deleteEndpointSQL, companyID, actor.UserID, id, actor.PasswordChangedAt)
	if err == nil && tag.RowsAffected() == 0 {
		err = refusal(ctx, q, actor, jobboard.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %d: %w", id, timeout(ctx, err))
	}
	return nil
}

// rotateSecretSQL makes $4 the secret; with an overlap ($5 seconds, more
// than zero) the one it replaces signs too until then. $6 is the actor's
// session.
var rotateSecretSQL = `
UPDATE webhook_endpoints AS e SET
	previous_secret = CASE WHEN $5 > 0 THEN e.secret END,
	previous_secret_until = CASE WHEN $5 > 0 THEN now() + make_interval(secs => $5) END,
	secret = $4,
	updated_at = now()
WHERE e.id = $3 AND e.company_id = $1 AND ` + webhookMember("$6") + `
RETURNING ` + endpointColumns

// RotateWebhookSecret replaces the endpoint's signing secret; the one it
// replaces keeps signing for overlap. Errors: jobboard.ErrNotFound,
// jobboard.ErrSessionRevoked.
func (u *unit) RotateWebhookSecret(ctx context.Context, actor jobboard.Actor, companyID, id int64, sealedSecret []byte, overlap time.Duration) (jobboard.WebhookEndpoint, error) {
	q, err := u.writer(ctx)
	if err != nil {
		return jobboard.WebhookEndpoint{}, fmt.Errorf("rotate secret of webhook endpoint %d: %w", id, err)
	}
	rows, _ := q.Query(ctx, rotateSecretSQL, companyID, actor.UserID, id, sealedSecret, overlap.Seconds(), actor.PasswordChangedAt)
	e, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		err = refusal(ctx, q, actor, jobboard.ErrNotFound)
	}
	if err != nil {
		return jobboard.WebhookEndpoint{}, fmt.Errorf("rotate secret of webhook endpoint %d: %w", id, timeout(ctx, err))
	}
	return e, nil
}

// deliveryColumns is the column list that scanDelivery reads, over d (a
// delivery) and ev (its event): the delivery, its event's facts, and its
// newest 50 attempts as a JSON array (more than a retry window makes).
const deliveryColumns = `d.id, d.endpoint_id, d.event_id::text, ev.type, d.state, d.failure_reason, d.attempts,
	d.created_at, d.dispatched_at, d.next_attempt_at, d.delivered_at,
	ev.company_id, ev.job_id, ev.application_id, ev.candidate_id, ev.old_status, ev.new_status, ev.endpoint_id, ev.occurred_at,
	coalesce((SELECT jsonb_agg(jsonb_build_object(
		'attempted_at', a.attempted_at, 'status_code', a.status_code, 'latency_ms', a.latency_ms,
		'error', a.error, 'response_body', a.response_body, 'response_truncated', a.response_truncated,
		'trigger', a.trigger) ORDER BY a.id DESC)
	FROM (SELECT * FROM webhook_attempts a WHERE a.delivery_id = d.id ORDER BY a.id DESC LIMIT 50) a), '[]')`

func scanDelivery(row pgx.CollectableRow) (jobboard.WebhookDelivery, error) {
	return scanDeliveryWith(row)
}

// scanDeliveryWith is scanDelivery for a row with more columns after the
// delivery's, read into extra.
func scanDeliveryWith(row pgx.CollectableRow, extra ...any) (jobboard.WebhookDelivery, error) {
	var (
		d                              jobboard.WebhookDelivery
		ev                             jobboard.WebhookEvent
		reason, oldStatus, newStatus   *string
		jobID, appID, candID, endpoint *int64
		attempts                       []byte
	)
	err := row.Scan(append([]any{&d.ID, &d.EndpointID, &d.EventID, &d.EventType, &d.State, &reason, &d.Attempts,
		&d.CreatedAt, &d.DispatchedAt, &d.NextAttemptAt, &d.DeliveredAt,
		&ev.CompanyID, &jobID, &appID, &candID, &oldStatus, &newStatus, &endpoint, &ev.OccurredAt, &attempts}, extra...)...)
	if err != nil {
		return d, err
	}
	ev.ID, ev.Type = d.EventID, d.EventType
	ev.JobID, ev.ApplicationID, ev.CandidateID, ev.EndpointID = deref(jobID), deref(appID), deref(candID), deref(endpoint)
	ev.OldStatus, ev.NewStatus = jobboard.ApplicationStatus(deref(oldStatus)), jobboard.ApplicationStatus(deref(newStatus))
	d.FailureReason = deref(reason)
	d.Payload = ev.Payload()
	if d.State != jobboard.DeliveryPending {
		d.NextAttemptAt = nil
	}
	if err := json.Unmarshal(attempts, &d.AttemptLog); err != nil {
		return d, fmt.Errorf("attempts of delivery %d: %w", d.ID, err)
	}
	return d, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// deliveriesSQL is one page of an endpoint's log, newest first, to a
// member of its company whose session ($7) is live; $5 keeps one state
// (NULL: all).
var deliveriesSQL = `
SELECT ` + deliveryColumns + `
FROM webhook_deliveries d
JOIN webhook_events ev ON ev.id = d.event_id
WHERE d.endpoint_id = $3 AND d.id < $4 AND ($5::text IS NULL OR d.state = $5)
  AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = $3 AND e.company_id = $1 AND ` + webhookMember("$7") + `)
ORDER BY d.id DESC
LIMIT $6`

// endpointVisibleSQL tells whether endpoint $3 belongs to company $1 and
// actor $2, whose session ($4) is live, is its member.
var endpointVisibleSQL = `
SELECT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = $3 AND e.company_id = $1 AND ` + webhookMember("$4") + `)`

// WebhookDeliveries lists an endpoint's deliveries, newest first, to a
// member of its company. Errors: jobboard.ErrNotFound,
// jobboard.ErrSessionRevoked.
func (db *DB) WebhookDeliveries(ctx context.Context, actor jobboard.Actor, companyID, endpointID int64, f jobboard.WebhookDeliveryFilter) (jobboard.Page[jobboard.WebhookDelivery], error) {
	limit := pageLimit(f.Limit)
	var state *string
	if f.State != "" {
		state = &f.State
	}
	rows, _ := db.pool.Query(ctx, deliveriesSQL, companyID, actor.UserID, endpointID, afterCursor(f.After), state, limit+1, actor.PasswordChangedAt)
	ds, err := pgx.CollectRows(rows, scanDelivery)
	if err == nil && len(ds) == 0 {
		var visible bool
		if err = db.pool.QueryRow(ctx, endpointVisibleSQL, companyID, actor.UserID, endpointID, actor.PasswordChangedAt).Scan(&visible); err == nil && !visible {
			err = refusal(ctx, db.pool, actor, jobboard.ErrNotFound)
		}
	}
	if err != nil {
		return jobboard.Page[jobboard.WebhookDelivery]{}, fmt.Errorf("deliveries of webhook endpoint %d: %w", endpointID, timeout(ctx, err))
	}
	return pageOf(ds, limit, func(d jobboard.WebhookDelivery) int64 { return d.ID }), nil
}

// dispatchedSQL logs a dispatch by hand of the delivery d, counted
// against the company's and the endpoint's bounds (dispatch), in the
// statement that dispatches it.
const dispatchedSQL = `
), logged AS (
	INSERT INTO webhook_dispatches (company_id, endpoint_id)
	SELECT $1, d.endpoint_id FROM d`

// replayDeliverySQL dispatches a delivery again: its next generation,
// pending, with its attempt count and lease reset (a message of the
// earlier dispatch then finds nothing to do), its outbox row and its line
// in the dispatch log, in one statement. The endpoint must be enabled; $5
// is the actor's session.
var replayDeliverySQL = `
WITH d AS (
	UPDATE webhook_deliveries AS d SET
		generation = d.generation + 1, state = 'pending', failure_reason = NULL, attempts = 0,
		trigger = 'replay', dispatched_at = now(), next_attempt_at = now(), delivered_at = NULL,
		lease_token = NULL, lease_until = NULL
	FROM webhook_endpoints e
	WHERE d.id = $4 AND d.endpoint_id = $3 AND e.id = d.endpoint_id AND e.company_id = $1 AND e.enabled
	  AND ` + webhookMember("$5") + `
	RETURNING d.*
), ob AS (` + deliveryOutboxInsertSQL + `
	FROM d
	RETURNING payload` + dispatchedSQL + `
)
SELECT ` + deliveryColumns + `, ARRAY(SELECT payload::text FROM ob)
FROM d JOIN webhook_events ev ON ev.id = d.event_id`

// deliveryTargetSQL explains why replayDeliverySQL found nothing: whether
// the delivery exists where the actor may see it, and whether its endpoint
// is enabled.
var deliveryTargetSQL = `
SELECT e.enabled
FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.id = $4 AND d.endpoint_id = $3 AND e.company_id = $1 AND ` + webhookMember("$5")

// ReplayWebhookDelivery dispatches a delivery again under the same event
// id, whatever its state, with its outbox row, within p's bounds. Errors:
// jobboard.ErrNotFound, jobboard.ErrWebhookEndpointDisabled, a
// *jobboard.WebhookDispatchThrottledError, jobboard.ErrSessionRevoked.
func (u *unit) ReplayWebhookDelivery(ctx context.Context, actor jobboard.Actor, companyID, endpointID, deliveryID int64, p jobboard.WebhookDispatchPolicy) (jobboard.WebhookDelivery, error) {
	d, err := u.dispatch(ctx, actor, companyID, endpointID, p, false, replayDeliverySQL, deliveryTargetSQL,
		[]any{companyID, actor.UserID, endpointID, deliveryID, actor.PasswordChangedAt})
	if err != nil {
		return jobboard.WebhookDelivery{}, fmt.Errorf("replay webhook delivery %d: %w", deliveryID, err)
	}
	return d, nil
}

// pingSQL writes a webhook.ping event for the endpoint, its delivery, its
// outbox row and its line in the dispatch log, in one statement. The
// endpoint must be enabled; $4 is the actor's session.
var pingSQL = `
WITH e AS (
	SELECT e.id, e.company_id FROM webhook_endpoints e
	WHERE e.id = $3 AND e.company_id = $1 AND e.enabled AND ` + webhookMember("$4") + `
), ev AS (
	INSERT INTO webhook_events (id, company_id, type, endpoint_id, occurred_at)
	SELECT gen_random_uuid(), e.company_id, 'webhook.ping', e.id, now() FROM e
	RETURNING *
), d AS (
	INSERT INTO webhook_deliveries (event_id, endpoint_id, trigger)
	SELECT ev.id, ev.endpoint_id, 'ping' FROM ev
	RETURNING *
), ob AS (` + deliveryOutboxInsertSQL + `
	FROM d
	RETURNING payload` + dispatchedSQL + `
)
SELECT ` + deliveryColumns + `, ARRAY(SELECT payload::text FROM ob)
FROM d JOIN ev ON ev.id = d.event_id`

// pingTargetSQL explains why pingSQL found nothing.
var pingTargetSQL = `
SELECT e.enabled FROM webhook_endpoints e
WHERE e.id = $3 AND e.company_id = $1 AND ` + webhookMember("$4")

// pendingPingSQL finds the endpoint's ($2, of company $1) ping that is
// still pending, through webhook_deliveries_pending_ping_idx, while the
// endpoint is enabled.
const pendingPingSQL = `
SELECT ` + deliveryColumns + `
FROM webhook_deliveries d
JOIN webhook_events ev ON ev.id = d.event_id
JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.endpoint_id = $2 AND d.trigger = 'ping' AND d.state = 'pending' AND e.company_id = $1 AND e.enabled
ORDER BY d.id DESC
LIMIT 1`

// PingWebhookEndpoint dispatches a webhook.ping event to an enabled
// endpoint, with its outbox row, within p's bounds; while a ping of the
// endpoint is pending, it returns that one and writes nothing. Errors:
// jobboard.ErrNotFound, jobboard.ErrWebhookEndpointDisabled, a
// *jobboard.WebhookDispatchThrottledError, jobboard.ErrSessionRevoked.
func (u *unit) PingWebhookEndpoint(ctx context.Context, actor jobboard.Actor, companyID, endpointID int64, p jobboard.WebhookDispatchPolicy) (jobboard.WebhookDelivery, error) {
	d, err := u.dispatch(ctx, actor, companyID, endpointID, p, true, pingSQL, pingTargetSQL,
		[]any{companyID, actor.UserID, endpointID, actor.PasswordChangedAt})
	if err != nil {
		return jobboard.WebhookDelivery{}, fmt.Errorf("ping webhook endpoint %d: %w", endpointID, err)
	}
	return d, nil
}

// dispatchHistorySQL reads the company's ($1) dispatches within the
// window ($3 seconds), and those of its endpoint $2, through
// webhook_dispatches_company_idx, with the database's clock.
const dispatchHistorySQL = `
SELECT count(*) FILTER (WHERE endpoint_id = $2), min(dispatched_at) FILTER (WHERE endpoint_id = $2),
       count(*), min(dispatched_at), now()
FROM webhook_dispatches
WHERE company_id = $1 AND dispatched_at > now() - make_interval(secs => $3)`

// dispatch runs a statement that dispatches one delivery by hand (replay,
// ping) with args, in a transaction that first locks the company's row
// (so that its dispatches are counted one after the other, exactly) and
// checks p's bounds; with mergePing, a pending ping of the endpoint is
// the answer instead, and nothing is written. When the statement
// dispatches nothing, or a bound refuses it, target (same args) tells
// whether the target is there and enabled, which is said first: nothing
// visible (ErrNotFound, or the actor's session has ended), a disabled
// endpoint.
func (u *unit) dispatch(ctx context.Context, actor jobboard.Actor, companyID, endpointID int64, p jobboard.WebhookDispatchPolicy,
	mergePing bool, sql, target string, args []any,
) (jobboard.WebhookDelivery, error) {
	var (
		d       jobboard.WebhookDelivery
		emitted []string
	)
	err := u.inTx(ctx, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, lockCompanyEndpointsSQL, companyID, actor.UserID, actor.PasswordChangedAt).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return refusal(ctx, tx, actor, jobboard.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if mergePing {
			rows, _ := tx.Query(ctx, pendingPingSQL, companyID, endpointID)
			if d, err = pgx.CollectExactlyOneRow(rows, scanDelivery); !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		var (
			h   jobboard.WebhookDispatchHistory
			now time.Time
			eo  *time.Time
			co  *time.Time
		)
		if err := tx.QueryRow(ctx, dispatchHistorySQL, companyID, endpointID, p.Window.Seconds()).
			Scan(&h.EndpointCount, &eo, &h.CompanyCount, &co, &now); err != nil {
			return err
		}
		h.EndpointOldest, h.CompanyOldest = deref(eo), deref(co)
		if wait, bound := p.Wait(h, now); wait > 0 {
			if err := dispatchTarget(ctx, tx, actor, target, args); err != nil {
				return err
			}
			return &jobboard.WebhookDispatchThrottledError{RetryAfter: wait, Bound: bound}
		}
		rows, _ := tx.Query(ctx, sql, args...)
		d, err = pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (jobboard.WebhookDelivery, error) {
			return scanDeliveryWith(row, &emitted)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			if err = dispatchTarget(ctx, tx, actor, target, args); err == nil {
				err = errors.New("the dispatch wrote nothing to an enabled endpoint")
			}
		}
		return err
	})
	if err == nil {
		err = u.emitPayloads(emitted)
	}
	if err != nil {
		return jobboard.WebhookDelivery{}, timeout(ctx, err)
	}
	return d, nil
}

// dispatchTarget runs target, a statement that tells whether a dispatch's
// target is there for the actor and enabled. Errors: jobboard.ErrNotFound,
// jobboard.ErrSessionRevoked, jobboard.ErrWebhookEndpointDisabled, the
// database's.
func dispatchTarget(ctx context.Context, q querier, actor jobboard.Actor, target string, args []any) error {
	var enabled bool
	err := q.QueryRow(ctx, target, args...).Scan(&enabled)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return refusal(ctx, q, actor, jobboard.ErrNotFound)
	case err == nil && !enabled:
		return jobboard.ErrWebhookEndpointDisabled
	}
	return err
}
