package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.SendSchedule = (*DB)(nil)

// takeSlotSQL takes the first free status slot ($1 the interval) if it is
// within the horizon $2, and otherwise tells how far it is; the row lock
// orders the takers of every worker. Times are the database's clock, and
// the answer is a wait from now, so the workers' clocks do not matter.
const takeSlotSQL = `
WITH taken AS (
	UPDATE send_schedule SET next_at = greatest(next_at, clock_timestamp()) + $1::interval
	WHERE greatest(next_at, clock_timestamp()) <= clock_timestamp() + $2::interval
	RETURNING next_at - $1::interval AS at)
SELECT true, extract(epoch FROM at - clock_timestamp())::float8 FROM taken
UNION ALL
SELECT false, extract(epoch FROM next_at - clock_timestamp())::float8 FROM send_schedule
WHERE NOT EXISTS (SELECT FROM taken)`

// takeAccountSlotSQL takes account mail's first free slot, from now on,
// if it is within the horizon, and moves the status slots on by one
// interval, so that the rate is kept over any span longer than the
// horizon.
const takeAccountSlotSQL = `
WITH taken AS (
	UPDATE send_schedule SET account_at = greatest(account_at, clock_timestamp()) + $1::interval,
		next_at = greatest(next_at, clock_timestamp()) + $1::interval
	WHERE greatest(account_at, clock_timestamp()) <= clock_timestamp() + $2::interval
	RETURNING account_at - $1::interval AS at)
SELECT true, extract(epoch FROM at - clock_timestamp())::float8 FROM taken
UNION ALL
SELECT false, extract(epoch FROM account_at - clock_timestamp())::float8 FROM send_schedule
WHERE NOT EXISTS (SELECT FROM taken)`

// TakeSendSlot takes the first free send slot within r.Horizon, in one
// statement. Errors: database errors.
func (db *DB) TakeSendSlot(ctx context.Context, r jobboard.SlotRequest) (jobboard.SendSlot, error) {
	if r.Interval <= 0 || r.Horizon < 0 {
		return jobboard.SendSlot{}, fmt.Errorf("take send slot: interval %v, horizon %v", r.Interval, r.Horizon)
	}
	q := takeSlotSQL
	if r.Account {
		q = takeAccountSlotSQL
	}
	var s jobboard.SendSlot
	var wait float64
	if err := db.pool.QueryRow(ctx, q, r.Interval, r.Horizon).Scan(&s.Taken, &wait); err != nil {
		return jobboard.SendSlot{}, fmt.Errorf("take send slot: %w", timeout(ctx, err))
	}
	s.Wait = max(time.Duration(wait*float64(time.Second)), 0)
	return s, nil
}
