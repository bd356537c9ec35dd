package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.CompanyStore = (*DB)(nil)

// companyColumns is the column list that scanCompany reads, in order.
const companyColumns = `c.id, c.name, c.description, c.website, c.created_by, c.created_at`

func scanCompany(row pgx.CollectableRow) (jobboard.Company, error) {
	var c jobboard.Company
	err := row.Scan(&c.ID, &c.Name, &c.Description, &c.Website, &c.CreatedBy, &c.CreatedAt)
	return c, err
}

// createCompanySQL inserts the company only when the actor is an employer
// according to the users table, not only according to the token, with a
// live session ($5, read from the same row).
const createCompanySQL = `
INSERT INTO companies AS c (name, description, website, created_by)
SELECT $1, $2, $3, u.id
FROM users u
WHERE u.id = $4 AND u.role = 'employer'
  AND (u.password_changed_at IS NULL OR u.password_changed_at <= $5)
RETURNING ` + companyColumns

const addCompanyMemberSQL = `
INSERT INTO company_members (company_id, user_id) VALUES ($1, $2)`

// lockEmployerSQL locks the employer's row for the rest of the
// transaction (FOR NO KEY UPDATE: what refers to the user may still be
// written), so that two creations of one employer count its companies one
// after the other (companiesCreatedSQL, a statement of its own, so that
// its snapshot is taken once the lock is held). No row: the account is
// gone.
const lockEmployerSQL = `SELECT u.id FROM users u WHERE u.id = $1 FOR NO KEY UPDATE OF u`

const companiesCreatedSQL = `SELECT count(*) FROM companies c WHERE c.created_by = $1`

// CreateCompany stores a company and makes the actor its first member, in
// one transaction, unless the actor has created
// jobboard.MaxCompaniesPerEmployer companies. Errors: jobboard.ErrForbidden
// when the actor is not an employer, jobboard.ErrTooManyCompanies,
// jobboard.ErrSessionRevoked.
func (u *unit) CreateCompany(ctx context.Context, actor jobboard.Actor, nc jobboard.NewCompany) (jobboard.Company, error) {
	if actor.Role != jobboard.RoleEmployer {
		return jobboard.Company{}, fmt.Errorf("create company: %w", jobboard.ErrForbidden)
	}
	var c jobboard.Company
	err := u.inTx(ctx, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, lockEmployerSQL, actor.UserID).Scan(&id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return jobboard.ErrForbidden // as createCompanySQL answers a user that is gone
		case err != nil:
			return err
		}
		var created int
		if err := tx.QueryRow(ctx, companiesCreatedSQL, actor.UserID).Scan(&created); err != nil {
			return err
		}
		if created >= jobboard.MaxCompaniesPerEmployer {
			return jobboard.ErrTooManyCompanies
		}
		rows, _ := tx.Query(ctx, createCompanySQL, nc.Name, nc.Description, nc.Website, actor.UserID, actor.PasswordChangedAt)
		c, err = pgx.CollectExactlyOneRow(rows, scanCompany)
		if errors.Is(err, pgx.ErrNoRows) {
			return refusal(ctx, tx, actor, jobboard.ErrForbidden)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, addCompanyMemberSQL, c.ID, actor.UserID)
		return err
	})
	if err != nil {
		return jobboard.Company{}, fmt.Errorf("create company: %w", timeout(ctx, err))
	}
	return c, nil
}

const companySQL = `
SELECT ` + companyColumns + `
FROM companies c
WHERE c.id = $1`

// Company returns a company. Errors: jobboard.ErrNotFound.
func (db *DB) Company(ctx context.Context, id int64) (jobboard.Company, error) {
	rows, _ := db.pool.Query(ctx, companySQL, id)
	c, err := pgx.CollectExactlyOneRow(rows, scanCompany)
	if err != nil {
		return jobboard.Company{}, fmt.Errorf("company %d: %w", id, notFound(timeout(ctx, err)))
	}
	return c, nil
}
