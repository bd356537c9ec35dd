package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// registerUser is the store's Register with the default policy: how a user is
// created through the store.
func registerUser(db *pgtest.DB, r jobboard.Registration, passwordHash string) (jobboard.User, error) {
	u, _, err := db.Register(context.Background(), r, passwordHash, jobboard.DefaultVerificationPolicy, time.Now())
	return u, err
}

func TestUsers(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()

	u, err := registerUser(db, jobboard.Registration{Email: "Ada@Example.COM", Name: "Ada", Role: jobboard.RoleCandidate}, "argon-hash")
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if u.ID == 0 || u.Email != "ada@example.com" || u.Name != "Ada" || u.Role != jobboard.RoleCandidate || u.CreatedAt.IsZero() {
		t.Errorf("Register = %+v", u)
	}

	t.Run("email taken in any case", func(t *testing.T) {
		_, err := registerUser(db, jobboard.Registration{Email: "ADA@example.com", Name: "Other", Role: jobboard.RoleEmployer}, "h")
		wantErr(t, err, jobboard.ErrEmailTaken)
		if n := count(t, db, "SELECT count(*) FROM users"); n != 1 {
			t.Errorf("users = %d, want 1", n)
		}
	})
	t.Run("by email", func(t *testing.T) {
		got, hash, err := db.UserByEmail(ctx, "ada@EXAMPLE.com")
		if err != nil {
			t.Fatalf("UserByEmail: %v", err)
		}
		if got != u || hash != "argon-hash" {
			t.Errorf("UserByEmail = %+v, %q; want %+v, %q", got, hash, u, "argon-hash")
		}
		_, _, err = db.UserByEmail(ctx, "nobody@example.com")
		wantErr(t, err, jobboard.ErrNotFound)
	})
	t.Run("by id", func(t *testing.T) {
		got, err := db.UserByID(ctx, u.ID)
		if err != nil {
			t.Fatalf("UserByID: %v", err)
		}
		if got != u {
			t.Errorf("UserByID = %+v, want %+v", got, u)
		}
		_, err = db.UserByID(ctx, u.ID+1000)
		wantErr(t, err, jobboard.ErrNotFound)
	})
	t.Run("a role the schema refuses is not mistaken for a taken email", func(t *testing.T) {
		_, err := registerUser(db, jobboard.Registration{Email: "x@example.com", Name: "X", Role: "admin"}, "h")
		if err == nil || errors.Is(err, jobboard.ErrEmailTaken) {
			t.Fatalf("err = %v, want a check violation", err)
		}
	})
}

// Two registrations racing for one address: the unique index lets exactly
// one win.
func TestRegisterRace(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := registerUser(db, jobboard.Registration{
				Email: "race@example.com", Name: "R", Role: jobboard.RoleCandidate}, fmt.Sprint(i))
			errs <- err
		}()
	}
	ok := 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, jobboard.ErrEmailTaken):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d registrations succeeded, want 1", ok)
	}
	if c := count(t, db, "SELECT count(*) FROM users WHERE email = 'race@example.com'"); c != 1 {
		t.Errorf("rows = %d, want 1", c)
	}
}
