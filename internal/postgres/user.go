package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.UserStore = (*DB)(nil)

// userColumns is the column list that scanUser reads, in order.
const userColumns = `u.id, u.email, u.name, u.role, u.created_at, u.email_verified_at IS NOT NULL,
	u.password_changed_at`

func scanUser(row pgx.CollectableRow) (jobboard.User, error) {
	var (
		u       jobboard.User
		changed *time.Time
	)
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.CreatedAt, &u.EmailVerified, &changed)
	if changed != nil {
		u.PasswordChangedAt = *changed
	}
	return u, err
}

const createUserSQL = `
INSERT INTO users AS u (email, password_hash, name, role)
VALUES (lower($1), $2, $3, $4)
RETURNING ` + userColumns

func createUser(ctx context.Context, q querier, r jobboard.Registration, passwordHash string) (jobboard.User, error) {
	rows, _ := q.Query(ctx, createUserSQL, r.Email, passwordHash, r.Name, r.Role)
	u, err := pgx.CollectExactlyOneRow(rows, scanUser)
	if isUniqueViolation(err, "users_email_key") {
		err = jobboard.ErrEmailTaken
	}
	return u, err
}

const userByEmailSQL = `
SELECT ` + userColumns + `, u.password_hash
FROM users u
WHERE u.email = lower($1)`

// UserByEmail returns the user with that email (compared case-insensitively)
// and its password hash. Errors: jobboard.ErrNotFound.
func (db *DB) UserByEmail(ctx context.Context, email string) (jobboard.User, string, error) {
	var (
		u       jobboard.User
		changed *time.Time
		hash    string
	)
	err := db.pool.QueryRow(ctx, userByEmailSQL, strings.TrimSpace(email)).
		Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.CreatedAt, &u.EmailVerified, &changed, &hash)
	if err != nil {
		return jobboard.User{}, "", fmt.Errorf("user by email: %w", notFound(timeout(ctx, err)))
	}
	if changed != nil {
		// The hash and the time of its reset come from one row: a session
		// issued on them is over as soon as a later reset commits.
		u.PasswordChangedAt = *changed
	}
	return u, hash, nil
}

const userByIDSQL = `
SELECT ` + userColumns + `
FROM users u
WHERE u.id = $1`

// UserByID returns a user. Errors: jobboard.ErrNotFound.
func (db *DB) UserByID(ctx context.Context, id int64) (jobboard.User, error) {
	rows, _ := db.pool.Query(ctx, userByIDSQL, id)
	u, err := pgx.CollectExactlyOneRow(rows, scanUser)
	if err != nil {
		return jobboard.User{}, fmt.Errorf("user %d: %w", id, notFound(timeout(ctx, err)))
	}
	return u, nil
}

// isUniqueViolation reports whether err is a unique violation (SQLSTATE
// 23505) of the named constraint or unique index.
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return pgCode(err) == uniqueViolation && errors.As(err, &pgErr) && pgErr.ConstraintName == constraint
}
