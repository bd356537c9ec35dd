package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func TestCreateCompany(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	employer := mustUser(t, db, jobboard.RoleEmployer)

	in := jobboard.NewCompany{Name: "Acme", Description: "Anvils.", Website: "https://acme.example"}
	c, err := db.CreateCompany(ctx, employer, in)
	if err != nil {
		t.Fatalf("CreateCompany: %v", err)
	}
	if c.ID == 0 || c.Name != in.Name || c.Description != in.Description || c.Website != in.Website ||
		c.CreatedBy != employer.UserID || c.CreatedAt.IsZero() {
		t.Errorf("CreateCompany = %+v", c)
	}
	if n := count(t, db, "SELECT count(*) FROM company_members WHERE company_id = $1 AND user_id = $2", c.ID, employer.UserID); n != 1 {
		t.Errorf("membership rows = %d, want 1", n)
	}
	got, err := db.Company(ctx, c.ID)
	if err != nil {
		t.Fatalf("Company: %v", err)
	}
	if got != c {
		t.Errorf("Company = %+v, want %+v", got, c)
	}
	_, err = db.Company(ctx, c.ID+1000)
	wantErr(t, err, jobboard.ErrNotFound)
}

func TestCreateCompanyForbidden(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	candidate := mustUser(t, db, jobboard.RoleCandidate)

	cases := map[string]jobboard.Actor{
		"candidate": candidate,
		// The token claims employer, the users table says candidate.
		"candidate claiming employer": {UserID: candidate.UserID, Role: jobboard.RoleEmployer},
		"unknown user":                {UserID: candidate.UserID + 1000, Role: jobboard.RoleEmployer},
	}
	for name, actor := range cases {
		_, err := db.CreateCompany(ctx, actor, jobboard.NewCompany{Name: "Nope"})
		if !errors.Is(err, jobboard.ErrForbidden) {
			t.Errorf("%s: err = %v, want ErrForbidden", name, err)
		}
	}
	if n := count(t, db, "SELECT count(*) FROM companies") + count(t, db, "SELECT count(*) FROM company_members"); n != 0 {
		t.Errorf("rows written = %d, want 0", n)
	}
}

// When the membership row cannot be written, the company is not left behind
// without a member: both rows commit together or not at all.
func TestCreateCompanyIsAtomic(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	employer := mustUser(t, db, jobboard.RoleEmployer)
	_, err := db.Pool.Exec(ctx, `
		CREATE FUNCTION fail_member() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;
		CREATE TRIGGER fail_member BEFORE INSERT ON company_members
		FOR EACH ROW EXECUTE FUNCTION fail_member();`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "Half"})
	if err == nil {
		t.Fatal("CreateCompany succeeded despite the failing member insert")
	}
	if n := count(t, db, "SELECT count(*) FROM companies"); n != 0 {
		t.Errorf("companies = %d, want 0", n)
	}
}
