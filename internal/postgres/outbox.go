package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.OutboxStore = (*DB)(nil)

// markPublishedSQL leaves an already published row as it is, so that its
// published_at keeps the first publication time.
const markPublishedSQL = `
UPDATE outbox SET published_at = now()
WHERE event_id = ANY ($1::uuid[]) AND published_at IS NULL`

// MarkPublished records that the queue accepted the events. Ids that are not
// in the outbox, or are published already, are ignored. Errors: database
// errors (an id that is not a UUID among them).
func (db *DB) MarkPublished(ctx context.Context, eventIDs []string) error {
	if _, err := db.pool.Exec(ctx, markPublishedSQL, eventIDs); err != nil {
		return fmt.Errorf("mark %d events published: %w", len(eventIDs), err)
	}
	return nil
}

// pendingOutboxSQL locks the oldest events that are still unpublished after
// the grace period, in which the API's own relay normally publishes them,
// and not older than the age beyond which events are never published. SKIP
// LOCKED lets two sweepers run at once without publishing the same row at
// the same time, and without waiting for each other. The partial index
// outbox_unpublished_idx serves it.
const pendingOutboxSQL = `
SELECT payload
FROM outbox
WHERE published_at IS NULL AND expired_at IS NULL
	AND created_at < now() - make_interval(secs => $1)
	AND created_at >= now() - make_interval(secs => $2)
ORDER BY created_at
LIMIT $3
FOR UPDATE SKIP LOCKED`

// PublishPending locks up to limit events unpublished for at least grace
// and at most maxAge old, passes them to publish inside the transaction,
// marks published the ids that publish returns, and commits. It returns how
// many events it locked and how many it marked. An error from publish rolls
// the transaction back (nothing is marked) and is returned wrapped. Errors:
// database errors, a payload that does not decode.
func (db *DB) PublishPending(ctx context.Context, grace, maxAge time.Duration, limit int,
	publish func(ctx context.Context, events []jobboard.Event) (accepted []string, err error),
) (locked, published int, err error) {
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, pendingOutboxSQL, grace.Seconds(), maxAge.Seconds(), limit)
		events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (jobboard.Event, error) {
			var payload []byte
			if err := row.Scan(&payload); err != nil {
				return jobboard.Event{}, err
			}
			ev, err := jobboard.DecodeEvent(payload)
			if err != nil {
				return jobboard.Event{}, fmt.Errorf("decode outbox payload: %w", err)
			}
			return ev, nil
		})
		if err != nil {
			return fmt.Errorf("lock pending events: %w", err)
		}
		locked = len(events)
		if locked == 0 {
			return nil
		}
		accepted, err := publish(ctx, events)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		if len(accepted) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, markPublishedSQL, accepted); err != nil {
			return fmt.Errorf("mark published: %w", err)
		}
		published = len(accepted)
		return nil
	})
	if err != nil {
		return locked, 0, fmt.Errorf("publish pending events: %w", err)
	}
	return locked, published, nil
}

// expireUnpublishedSQL gives up on the events that stayed unpublished for
// longer than they may be published. SKIP LOCKED leaves alone a row that a
// sweeper is publishing at this moment.
const expireUnpublishedSQL = `
UPDATE outbox SET expired_at = now()
WHERE event_id IN (
	SELECT event_id FROM outbox
	WHERE published_at IS NULL AND expired_at IS NULL AND created_at < now() - make_interval(secs => $1)
	FOR UPDATE SKIP LOCKED)
RETURNING event_id`

// ExpireUnpublished marks the unpublished events older than olderThan as
// expired, so that they are never published, and returns their ids.
// Errors: database errors.
func (db *DB) ExpireUnpublished(ctx context.Context, olderThan time.Duration) ([]string, error) {
	rows, _ := db.pool.Query(ctx, expireUnpublishedSQL, olderThan.Seconds())
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("expire unpublished events: %w", err)
	}
	return ids, nil
}

// backlogSQL counts what has not reached the queue, through the partial
// index outbox_unpublished_idx.
const backlogSQL = `
SELECT count(*), coalesce(now() - min(created_at), '0')
FROM outbox WHERE published_at IS NULL AND expired_at IS NULL`

// Backlog reports the unpublished, unexpired events. Errors: database
// errors.
func (db *DB) Backlog(ctx context.Context) (jobboard.OutboxBacklog, error) {
	var b jobboard.OutboxBacklog
	if err := db.pool.QueryRow(ctx, backlogSQL).Scan(&b.Count, &b.OldestAge); err != nil {
		return jobboard.OutboxBacklog{}, fmt.Errorf("outbox backlog: %w", err)
	}
	return b, nil
}
