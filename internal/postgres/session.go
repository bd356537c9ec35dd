package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// A signed-in actor's session is live while its account exists and its
// password has not been reset since the session was issued
// (jobboard.Actor.PasswordChangedAt). Every statement that does an actor's
// work checks that itself, in its own WHERE, beside the authorisation it
// checks already: one more probe of users_pkey inside a statement the
// request runs anyway, where a statement of its own would cost a round
// trip per request. Such a statement finds nothing for an ended session,
// as it finds nothing for a row the actor may not see; refusal tells the
// two apart, on that path only.

// liveSession is the SQL condition that the session of the actor whose id
// is the parameter user, issued under the password change in the
// parameter changed, is live. The parameters are given as they appear in
// the statement ("$2"), or as fmt verbs for a statement that is itself a
// template ("$%[2]d").
func liveSession(user, changed string) string {
	return `EXISTS (SELECT 1 FROM users s WHERE s.id = ` + user +
		` AND (s.password_changed_at IS NULL OR s.password_changed_at <= ` + changed + `))`
}

// sessionSQL reads what decides whether a session is live.
const sessionSQL = `SELECT password_changed_at FROM users WHERE id = $1`

// refusal returns what a statement that checks the actor's session found
// nothing for: jobboard.ErrSessionRevoked when the password has been reset
// since the session was issued, and otherwise err (the row is not there,
// or not the actor's to see; an account that is gone sees nothing, as
// before sessions were checked). Errors: those of the database, in place
// of err.
func refusal(ctx context.Context, q querier, a jobboard.Actor, err error) error {
	var changed *time.Time
	switch qerr := q.QueryRow(ctx, sessionSQL, a.UserID).Scan(&changed); {
	case errors.Is(qerr, pgx.ErrNoRows):
		return err
	case qerr != nil:
		return fmt.Errorf("read session of user %d: %w", a.UserID, timeout(ctx, qerr))
	case changed != nil && changed.After(a.PasswordChangedAt):
		return jobboard.ErrSessionRevoked
	}
	return err
}

// sessionOf is the session parameter of a statement for an actor that may
// be anonymous (nil): the password change the session was issued under.
func sessionOf(actor *jobboard.Actor) *time.Time {
	if actor == nil {
		return nil
	}
	return &actor.PasswordChangedAt
}
