package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
)

// The functions of migration 014 answer exactly what the statements they
// stand for answer, in every query exec mode: the job reads and the update
// row for row and column for column (the update's two ways each in a
// savepoint of one transaction, so that both start from the same row and
// the same now()), and the search page for page, for searches that have
// functions and for those that do not.
func TestProxySafeFunctionsAnswerAsTheirStatements(t *testing.T) {
	t.Parallel()
	bd := newBoard(t)
	ctx := context.Background()
	revoked := bd.eb
	revoked.PasswordChangedAt = time.Now().Add(-time.Hour) // a session from before the password's change
	if _, err := bd.db.Pool.Exec(ctx, "UPDATE users SET password_changed_at = now() WHERE id = $1", revoked.UserID); err != nil {
		t.Fatal(err)
	}
	open, closed := bd.jobs[0], bd.jobs[5] // company a's
	type call struct {
		pair string
		args []any
	}
	patch := func(id int64, actor jobboard.Actor, title *string, status *string, setSalary bool) []any {
		return []any{id, actor.UserID, title, nil, nil, nil, nil, setSalary, nil, nil, nil, status, actor.PasswordChangedAt}
	}
	calls := []call{
		{"job read, anonymous", []any{open.ID}},
		{"job read, anonymous", []any{closed.ID}},
		{"job read, anonymous", []any{int64(1 << 40)}},
		{"job read, a member", []any{closed.ID, bd.ea.UserID, bd.ea.PasswordChangedAt}},
		{"job read, a member", []any{closed.ID, bd.eb.UserID, bd.eb.PasswordChangedAt}},
		{"job read, a member", []any{closed.ID, (*int64)(nil), (*time.Time)(nil)}},
		{"job read, a member", []any{open.ID, (*int64)(nil), (*time.Time)(nil)}},
		{"job update", patch(open.ID, bd.ea, ptr("Staff Engineer"), nil, false)},
		{"job update", patch(open.ID, bd.ea, nil, ptr("closed"), true)},
		{"job update", patch(closed.ID, bd.ea, nil, ptr("open"), false)},
		{"job update", patch(open.ID, bd.eb, ptr("Not theirs"), nil, false)},
		{"job update", patch(bd.jobs[1].ID, revoked, ptr("Revoked"), nil, false)},
	}
	pairs := map[string]postgres.FunctionPair{}
	for _, p := range postgres.FunctionPairs {
		pairs[p.Name] = p
	}
	for _, store := range everyMode(t, bd.db) {
		pool := postgres.Pool(store.db.DB)
		for i, c := range calls {
			p := pairs[c.pair]
			var answers [2][][]any
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				for way, sql := range []string{p.Statement, p.Function} {
					if _, err := tx.Exec(ctx, "SAVEPOINT way"); err != nil {
						return err
					}
					rows, _ := tx.Query(ctx, sql, c.args...)
					got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) { return row.Values() })
					if err != nil {
						return fmt.Errorf("%s: %w", sql, err)
					}
					answers[way] = got
					if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT way"); err != nil {
						return err
					}
				}
				return errors.New("rollback")
			})
			if err != nil && err.Error() != "rollback" {
				t.Fatalf("%s, %s #%d: %v", store.mode, c.pair, i, err)
			}
			if diff := cmp.Diff(answers[0], answers[1]); diff != "" {
				t.Errorf("%s, %s #%d (-statement +function):\n%s", store.mode, c.pair, i, diff)
			}
		}
		// Every search shape, and a later page of each: the answers of
		// the two ways, and that the searches without filters did call a
		// function.
		for _, f := range []jobboard.JobFilter{
			{}, {Limit: 7}, {Query: "engineer"}, {Query: "engineer", Limit: 3}, {Query: "python or nurse", Limit: 2},
			{Query: "astronaut"}, {Query: "engineer -engineer"}, {Query: "-engineer"},
			{Query: manyWords + " nurse", Limit: 2}, {Query: "engineer", Location: "berlin"},
			{Location: "Berlin", Limit: 2}, {CompanyID: &bd.a.ID, Limit: 4},
		} {
			for page := 0; page < 3; page++ {
				statements, functions := store.db.SearchJobsBothWays(ctx, nil, f)
				if fmt.Sprint(statements.Err) != fmt.Sprint(functions.Err) {
					t.Fatalf("%s, %+v: errors %v (statements), %v (functions)", store.mode, f, statements.Err, functions.Err)
				}
				if diff := cmp.Diff(statements.Listing, functions.Listing); diff != "" {
					t.Errorf("%s, %+v (-statements +functions):\n%s", store.mode, f, diff)
				}
				called := strings.HasPrefix(functions.Sent[0], "SELECT * FROM search_open_jobs")
				if wantCall := !filtered(f) && !postgres.SearchIndexFirst(f.Query, max(f.Limit, jobboard.DefaultPageSize)+1); called != wantCall {
					t.Errorf("%s, %+v: sent %q; want a function called: %t", store.mode, f, functions.Sent[0], wantCall)
				}
				if statements.Err != nil || statements.Listing.NextAfter == 0 {
					break
				}
				f.After = statements.Listing.NextAfter
			}
		}
	}
}

// filtered tells a search with a filter besides its words and its cursor.
func filtered(f jobboard.JobFilter) bool {
	return f.Location != "" || f.Remote != nil || f.EmploymentType != "" || f.SalaryMin != nil || f.CompanyID != nil
}
