package pgtest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// createUserSQL makes a user the way no request does: without the
// verification email that the store's Register queues with it.
const createUserSQL = `
INSERT INTO users (email, password_hash, name, role)
VALUES (lower($1), $2, $3, $4)
RETURNING id, email, name, role, created_at, email_verified_at IS NOT NULL`

// CreateUser stores a new, unverified user with the given password hash
// through pool, behind the store's back, and queues no verification email
// (the API registers through the store's Register): how tests make the
// users they need. The email is stored lower-cased. Errors: the database's
// (a taken email is a unique violation).
func CreateUser(ctx context.Context, pool *pgxpool.Pool, r jobboard.Registration, passwordHash string) (jobboard.User, error) {
	var u jobboard.User
	err := pool.QueryRow(ctx, createUserSQL, r.Email, passwordHash, r.Name, r.Role).
		Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.CreatedAt, &u.EmailVerified)
	if err != nil {
		return jobboard.User{}, fmt.Errorf("create user %s: %w", r.Email, err)
	}
	return u, nil
}

// CreateUser is CreateUser through db's raw pool.
func (db *DB) CreateUser(ctx context.Context, r jobboard.Registration, passwordHash string) (jobboard.User, error) {
	return CreateUser(ctx, db.Pool, r, passwordHash)
}
