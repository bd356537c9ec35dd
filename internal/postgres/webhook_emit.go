package postgres

import (
	"github.com/jobboard/jobboard/internal/jobboard"
)

// Webhook events are written by the statement of the change itself (the
// application's INSERT, the status change's outbox INSERT, the job's
// UPDATE), as more common table expressions of it: one round trip, one
// transaction, and for a company without an enabled endpoint that wants
// the event nothing but one probe of webhook_endpoints_enabled_idx.
//
// webhookEmitSQL expects a CTE wh_src before it: one row per event type to
// emit, with the columns (type, company_id, job_id, application_id,
// candidate_id, old_status, new_status, occurred_at). For each type that an
// enabled endpoint of the company subscribes to it writes the event, a
// delivery per such endpoint and an outbox row per delivery (bound for the
// webhook queue); wh_outbox returns the rows' payloads, which the statement
// hands back to its unit of work (unit.emitPayloads).
const webhookEmitSQL = `
wh_target AS (
	SELECT s.type, e.id AS endpoint_id
	FROM wh_src s
	JOIN webhook_endpoints e ON e.company_id = s.company_id AND e.enabled AND s.type = ANY (e.event_types)
), wh_event AS (
	INSERT INTO webhook_events (id, company_id, type, job_id, application_id, candidate_id, old_status, new_status, occurred_at)
	SELECT gen_random_uuid(), s.company_id, s.type, s.job_id, s.application_id, s.candidate_id, s.old_status, s.new_status, s.occurred_at
	FROM wh_src s
	WHERE EXISTS (SELECT 1 FROM wh_target t WHERE t.type = s.type)
	RETURNING id, type
), wh_delivery AS (
	INSERT INTO webhook_deliveries (event_id, endpoint_id)
	SELECT ev.id, t.endpoint_id FROM wh_event ev JOIN wh_target t ON t.type = ev.type
	RETURNING id, generation, dispatched_at
), wh_outbox AS (` + deliveryOutboxInsertSQL + `
	FROM wh_delivery d
	RETURNING payload
)`

// deliveryOutboxInsertSQL writes the outbox row of a dispatch of delivery d
// (a relation with id, generation, dispatched_at): a
// webhook.delivery_requested event whose id is derived from the delivery
// and its generation, so that one dispatch is one row however often the
// statement runs.
const deliveryOutboxInsertSQL = `
	INSERT INTO outbox (event_id, event_type, payload, created_at)
	SELECT md5('webhook-delivery:' || d.id || ':' || d.generation)::uuid, 'webhook.delivery_requested',
	       jsonb_build_object('type', 'webhook.delivery_requested',
	                          'event_id', md5('webhook-delivery:' || d.id || ':' || d.generation)::uuid,
	                          'occurred_at', d.dispatched_at, 'delivery_id', d.id, 'generation', d.generation),
	       d.dispatched_at`

// emittedSQL is the column that a statement with webhookEmitSQL returns:
// the payloads of the outbox rows it wrote.
const emittedSQL = `ARRAY(SELECT payload::text FROM wh_outbox)`

// applyEmittingSQL is applySQL with the application.submitted event.
const applyEmittingSQL = `
WITH ins AS (` + applySQL + `
), wh_src AS (
	SELECT 'application.submitted'::text AS type, j.company_id, ins.job_id, ins.id AS application_id,
	       ins.candidate_id, NULL::text AS old_status, ins.status::text AS new_status, ins.created_at AS occurred_at
	FROM ins JOIN jobs j ON j.id = ins.job_id
), ` + webhookEmitSQL + `
SELECT ins.*, ` + emittedSQL + ` FROM ins`

// changeStatusEmittingSQL is changeStatusOutboxSQL with the webhook events
// of the change: $5 the application, $6 its candidate, $7 its job, $8 the
// old status, $9 the new one and $10 the event types (status_changed, and
// withdrawn for a withdrawal); $4 is the time of the change.
const changeStatusEmittingSQL = `
WITH ob AS (` + changeStatusOutboxSQL + `
	RETURNING event_id
), wh_src AS (
	SELECT t.type, j.company_id, j.id AS job_id, $5::bigint AS application_id, $6::bigint AS candidate_id,
	       $8::text AS old_status, $9::text AS new_status, $4::timestamptz AS occurred_at
	FROM jobs j, unnest($10::text[]) AS t(type)
	WHERE j.id = $7
), ` + webhookEmitSQL + `
SELECT ` + emittedSQL

// updateJobClosingSQL is updateJobSQL for a patch that closes the job,
// with the job.closed event when the job was open. cur reads the status
// before the update under the row lock (FOR UPDATE), and the update joins
// cur, so that it runs after: a concurrent close waits for the lock and
// then finds the job closed, so one close makes one event.
var updateJobClosingSQL = `
WITH cur AS (
	SELECT j.id, j.status FROM jobs j
	WHERE j.id = $1 AND ` + jobMemberSessionSQL + `
	FOR UPDATE OF j
), upd AS (` + updateJobSetSQL + `
	FROM cur WHERE j.id = cur.id
	RETURNING ` + jobColumns + `, cur.status AS was
), wh_src AS (
	SELECT 'job.closed'::text AS type, upd.company_id, upd.id AS job_id, NULL::bigint AS application_id,
	       NULL::bigint AS candidate_id, NULL::text AS old_status, NULL::text AS new_status, upd.updated_at AS occurred_at
	FROM upd WHERE upd.was = 'open' AND upd.status = 'closed'
), ` + webhookEmitSQL + `
SELECT upd.*, ` + emittedSQL + ` FROM upd`

// statusWebhookTypes are the webhook event types of a status change.
func statusWebhookTypes(to jobboard.ApplicationStatus) []string {
	if to == jobboard.StatusWithdrawn {
		return []string{jobboard.WebhookApplicationStatusChanged, jobboard.WebhookApplicationWithdrawn}
	}
	return []string{jobboard.WebhookApplicationStatusChanged}
}
