package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.UserStore = (*DB)(nil)

// userColumns is the column list that scanUser reads, in order.
const userColumns = `u.id, u.email, u.name, u.role, u.created_at`

func scanUser(row pgx.CollectableRow) (jobboard.User, error) {
	var u jobboard.User
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.CreatedAt)
	return u, err
}

const createUserSQL = `
INSERT INTO users AS u (email, password_hash, name, role)
VALUES (lower($1), $2, $3, $4)
RETURNING ` + userColumns

// CreateUser stores a new user with the given password hash. The email is
// stored lower-cased. Errors: jobboard.ErrEmailTaken when a user with that
// email (in any case) exists.
func (db *DB) CreateUser(ctx context.Context, r jobboard.Registration, passwordHash string) (jobboard.User, error) {
	q, err := db.writer(ctx)
	if err != nil {
		return jobboard.User{}, fmt.Errorf("create user: %w", err)
	}
	rows, _ := q.Query(ctx, createUserSQL, r.Email, passwordHash, r.Name, r.Role)
	u, err := pgx.CollectExactlyOneRow(rows, scanUser)
	if err != nil {
		if isUniqueViolation(err, "users_email_key") {
			err = jobboard.ErrEmailTaken
		}
		return jobboard.User{}, fmt.Errorf("create user: %w", timeout(ctx, err))
	}
	return u, nil
}

const userByEmailSQL = `
SELECT ` + userColumns + `, u.password_hash
FROM users u
WHERE u.email = lower($1)`

// UserByEmail returns the user with that email (compared case-insensitively)
// and its password hash. Errors: jobboard.ErrNotFound.
func (db *DB) UserByEmail(ctx context.Context, email string) (jobboard.User, string, error) {
	var (
		u    jobboard.User
		hash string
	)
	err := db.pool.QueryRow(ctx, userByEmailSQL, strings.TrimSpace(email)).
		Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.CreatedAt, &hash)
	if err != nil {
		return jobboard.User{}, "", fmt.Errorf("user by email: %w", notFound(timeout(ctx, err)))
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
