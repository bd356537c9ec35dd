package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// keptTable is one line of the retention: a table's name as the sweeper
// reports it (and logs it, name_deleted), how long its rows are kept given
// the claim retention, and the statement that deletes one batch of its rows
// older than that ($1 seconds, at most $2 rows).
type keptTable struct {
	name   string
	age    func(retention time.Duration) time.Duration
	delete string
}

// keptTables is what the database keeps for a while, and how long. Nothing
// orders the lines: no table's rows refer to another's.
var keptTables = []keptTable{
	// Claims: once older than the retention, no copy of their event can
	// arrive any more (jobboard.MaxEventAge). Their link tokens go with
	// them (ON DELETE CASCADE).
	{"processed_events", asClaims, deleteOlderSQL("processed_events", "processed_at", "")},
	// Outbox rows published or expired as long ago.
	{"outbox", asClaims, deleteFinishedOutboxSQL},
	// The stored answers of idempotency keys, for the keys' lifetime.
	{"idempotency_keys", always(jobboard.IdempotencyKeyTTL), deleteOlderSQL("idempotency_keys", "created_at", "")},
	// Failed-login counts past the login policy's reset period that block
	// nothing any more: the next failure would start such a count again
	// at 1. A count that a new failure updates meanwhile has another ctid
	// and stays.
	{"login_failures", always(jobboard.DefaultLoginPolicy.ResetAfter),
		deleteOlderSQL("login_failures", "last_failure", "AND (blocked_until IS NULL OR blocked_until < now())")},
	// Email requests past their policy's window count against no bound.
	{"verification_requests", always(jobboard.DefaultVerificationPolicy.Window), deleteOlderSQL("email_verification_requests", "requested_at", "")},
	{"password_reset_requests", always(jobboard.DefaultPasswordResetPolicy.Window), deleteOlderSQL("password_reset_requests", "requested_at", "")},
	// Webhook dispatches by hand past their policy's window.
	{"webhook_dispatches", always(jobboard.DefaultWebhookDispatchPolicy.Window), deleteOlderSQL("webhook_dispatches", "dispatched_at", "")},
	// Webhook events, with their deliveries and attempts (ON DELETE CASCADE).
	{"webhook_events", asClaims, deleteOlderSQL("webhook_events", "occurred_at", "")},
	// The keys of applied feedback events must outlive every copy of their
	// event, which the claim retention does; a delivery state completes the
	// claim's outcome in the history, so it is kept exactly as long
	// (docs/design.md, "Delivery feedback").
	{"feedback_events", asClaims, deleteOlderSQL("email_feedback_events", "received_at", "")},
	{"email_deliveries", asClaims, deleteOlderSQL("email_deliveries", "updated_at", "")},
}

// asClaims keeps a table's rows as long as the claims: the retention.
func asClaims(retention time.Duration) time.Duration { return retention }

// always keeps a table's rows for age, whatever the retention.
func always(age time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return age }
}

// deleteOlderSQL deletes one batch of the rows of table whose column is
// older than $1 seconds (and that meet the condition also, if any), at most
// $2 rows. ctid = ANY (ARRAY(...)) is answered with a TID scan, so each
// statement touches only the rows it deletes and holds its locks for a
// moment. The column leads an index of each table but the two request
// tables, which hold at most a window of requests plus what this deletes.
func deleteOlderSQL(table, column, also string) string {
	return `
DELETE FROM ` + table + `
WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM ` + table + `
	WHERE ` + column + ` < now() - make_interval(secs => $1) ` + also + `
	LIMIT $2))`
}

// deleteFinishedOutboxSQL deletes one batch of outbox rows published or
// expired long ago, found through the partial indexes outbox_published_idx
// and outbox_expired_idx. Unpublished rows are never deleted, however old:
// the sweeper still owes them an expiry.
const deleteFinishedOutboxSQL = `
DELETE FROM outbox
WHERE ctid = ANY (ARRAY(
	(SELECT ctid FROM outbox
	 WHERE published_at IS NOT NULL AND published_at < now() - make_interval(secs => $1)
	 LIMIT $2)
	UNION ALL
	(SELECT ctid FROM outbox
	 WHERE expired_at IS NOT NULL AND expired_at < now() - make_interval(secs => $1)
	 LIMIT $2)))`

// DeleteExpired applies the retention: for each kept table in turn, it
// deletes the rows older than the table's age (retention is the claims'),
// batch rows per statement, each statement its own transaction, until one
// deletes less than a full batch. A table that fails does not stop the
// others. It returns how many rows each table lost, every table named (a
// failed one with what it deleted before). Errors: batch not positive;
// database errors, each naming its table, joined.
func (db *DB) DeleteExpired(ctx context.Context, retention time.Duration, batch int) (map[string]int64, error) {
	if batch <= 0 {
		return nil, fmt.Errorf("delete expired rows: batch size %d: must be positive", batch)
	}
	deleted := make(map[string]int64, len(keptTables))
	var errs []error
	for _, t := range keptTables {
		deleted[t.name] = 0
		for {
			tag, err := db.pool.Exec(ctx, t.delete, t.age(retention).Seconds(), batch)
			if err != nil {
				errs = append(errs, fmt.Errorf("delete old %s: %w", t.name, err))
				break
			}
			deleted[t.name] += tag.RowsAffected()
			if tag.RowsAffected() < int64(batch) {
				break
			}
		}
	}
	return deleted, errors.Join(errs...)
}
