package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func keyed(scope, key, fp string) *jobboard.IdempotentRequest {
	return &jobboard.IdempotentRequest{Scope: scope, Key: key, Fingerprint: []byte(fp)}
}

func answer(fp, body string) jobboard.StoredResponse {
	return jobboard.StoredResponse{Fingerprint: []byte(fp), Status: 201,
		Header: map[string]string{"Location": "/v1/companies/1"}, Body: []byte(body)}
}

// storeOnly is a keyed write's callback that writes nothing and answers a.
func storeOnly(a jobboard.StoredResponse) func(jobboard.Writes) (*jobboard.StoredResponse, error) {
	return func(jobboard.Writes) (*jobboard.StoredResponse, error) { return &a, nil }
}

// The answer commits with the writes made through the keyed write's store,
// and is found afterwards under its scope and key only.
func TestKeyedWriteCommitsAnswerWithWrites(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	employer := mustUser(t, db, jobboard.RoleEmployer)

	var (
		c    jobboard.Company
		kept jobboard.Writes
	)
	_, err := db.Write(ctx, keyed("user:1", "key-0000000000001", "fp"), func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
		kept = st
		var err error
		if c, err = st.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "Keyed"}); err != nil {
			return nil, err
		}
		// Not visible outside the transaction before the commit.
		if n := count(t, db, "SELECT count(*) FROM companies WHERE id = $1", c.ID); n != 0 {
			t.Errorf("company visible before commit")
		}
		if _, err := db.StoredResponse(ctx, "user:1", "key-0000000000001"); err == nil {
			t.Error("answer visible before commit")
		}
		a := answer("fp", `{"id":1}`)
		return &a, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(*) FROM companies WHERE id = $1", c.ID); n != 1 {
		t.Fatalf("company rows after commit = %d", n)
	}
	got, err := db.StoredResponse(ctx, "user:1", "key-0000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != 201 || string(got.Body) != `{"id":1}` || got.Header["Location"] != "/v1/companies/1" || !bytes.Equal(got.Fingerprint, []byte("fp")) {
		t.Fatalf("stored answer = %+v", got)
	}
	_, err = db.StoredResponse(ctx, "user:2", "key-0000000000001")
	wantErr(t, err, jobboard.ErrNotFound)

	// The keyed write's store, kept past its callback, writes nowhere.
	if _, err := kept.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "After"}); err == nil {
		t.Fatal("a write through an ended keyed write's store succeeded")
	}
	if n := count(t, db, "SELECT count(*) FROM companies"); n != 1 {
		t.Fatalf("companies = %d, want 1", n)
	}
}

// A callback that answers nothing, or fails, leaves neither the writes nor
// an answer; its error is Write's.
func TestKeyedWriteRollback(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	failed := errors.New("the handler failed")
	for i, result := range []error{nil, failed} {
		_, err := w.db.Write(ctx, keyed("user:1", fmt.Sprintf("key-000000000000%d", i), "fp"), func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
			if _, err := st.CreateJob(ctx, w.employer, w.company.ID, newJob("Rolled back")); err != nil {
				return nil, err
			}
			if _, err := st.Apply(ctx, w.candidate, w.job.ID, jobboard.NewApplication{}); err != nil {
				return nil, err
			}
			return nil, result
		})
		if !errors.Is(err, result) || (result == nil && err != nil) {
			t.Fatalf("Write = %v; want %v", err, result)
		}
	}
	if n := count(t, w.db, "SELECT count(*) FROM jobs"); n != 1 {
		t.Errorf("jobs = %d, want the world's 1", n)
	}
	if n := count(t, w.db, "SELECT count(*) FROM applications"); n != 0 {
		t.Errorf("applications = %d, want 0", n)
	}
	if n := count(t, w.db, "SELECT count(*) FROM idempotency_keys"); n != 0 {
		t.Errorf("stored answers = %d, want 0", n)
	}
}

// Write hands back the events its unit committed, in the order written:
// a keyed write's once its commit succeeded and none when it rolls back;
// an unkeyed write's as each write commits, also when fn then fails.
// A write that fails writes no event.
func TestWriteHandsBackCommittedEvents(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	review := jobboard.StatusChange{Status: jobboard.StatusReviewing}
	failed := errors.New("the handler failed")
	a, err := w.db.Apply(ctx, w.candidate, w.job.ID, jobboard.NewApplication{})
	if err != nil {
		t.Fatal(err)
	}

	// Keyed, rolled back by fn's error after the change: nothing.
	evs, err := w.db.Write(ctx, keyed("user:1", "key-0000000000021", "fp"), func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
		if _, err := st.ChangeStatus(ctx, w.employer, a.ID, review); err != nil {
			return nil, err
		}
		return nil, failed
	})
	if !errors.Is(err, failed) || len(evs) != 0 {
		t.Fatalf("rolled back: %+v, %v; want no events and fn's error", evs, err)
	}

	// Keyed, committed: the change's event, committed when handed back.
	evs, err = w.db.Write(ctx, keyed("user:1", "key-0000000000022", "fp"), func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
		if _, err := st.ChangeStatus(ctx, w.employer, a.ID, review); err != nil {
			return nil, err
		}
		an := answer("fp", "{}")
		return &an, nil
	})
	if err != nil || len(evs) != 1 || evs[0].Type != jobboard.EventTypeStatusChanged || evs[0].ApplicationID != a.ID {
		t.Fatalf("committed: %+v, %v; want the status event", evs, err)
	}
	if n := count(t, w.db, `SELECT count(*) FROM outbox WHERE event_id = $1::uuid`, evs[0].EventID); n != 1 {
		t.Fatalf("the handed-back event's outbox rows: %d, want 1", n)
	}

	// Unkeyed: a change committed on its own, then a refused one (no
	// event), then fn fails: the committed change's event, with fn's error.
	evs, err = w.db.Write(ctx, nil, func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
		if _, err := st.ChangeStatus(ctx, w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusInterview}); err != nil {
			return nil, err
		}
		if _, err := st.ChangeStatus(ctx, w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusSubmitted}); !errors.Is(err, jobboard.ErrInvalidTransition) {
			t.Errorf("a refused change: %v", err)
		}
		return nil, failed
	})
	if !errors.Is(err, failed) || len(evs) != 1 || evs[0].NewStatus != jobboard.StatusInterview {
		t.Fatalf("unkeyed: %+v, %v; want the committed change's event and fn's error", evs, err)
	}
	if n := count(t, w.db, `SELECT count(*) FROM outbox WHERE event_type = $1`, jobboard.EventTypeStatusChanged); n != 2 {
		t.Fatalf("%d status events in the outbox, want 2", n)
	}
}

// While one keyed write holds a key, a second one's first write fails at
// once with ErrIdempotencyKeyInUse (it does not wait), and so does it after
// the first has stored its answer. Another scope is not affected.
func TestKeyedWriteKeyInUse(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	employer := mustUser(t, db, jobboard.RoleEmployer)
	unverified, err := db.CreateUser(ctx, jobboard.Registration{Email: "other@example.com", Name: "O", Role: jobboard.RoleCandidate}, "hash")
	if err != nil {
		t.Fatal(err)
	}
	req := keyed("user:1", "key-0000000000003", "fp")

	_, err = db.Write(ctx, req, func(a jobboard.Writes) (*jobboard.StoredResponse, error) {
		if _, err := a.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "A"}); err != nil {
			return nil, err
		}
		start := time.Now()
		_, err := db.Write(ctx, req, func(b jobboard.Writes) (*jobboard.StoredResponse, error) {
			_, err := b.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "B"})
			return nil, err
		})
		wantErr(t, err, jobboard.ErrIdempotencyKeyInUse)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the second writer waited %v", d)
		}
		// (A verification request, not a company: A's company holds the
		// listing version's row until A commits, and this test runs A and
		// the other on one goroutine.)
		_, err = db.Write(ctx, keyed("user:2", "key-0000000000003", "fp"), func(o jobboard.Writes) (*jobboard.StoredResponse, error) {
			if err := o.RequestVerification(ctx, unverified.ID, jobboard.DefaultVerificationPolicy, time.Now()); err != nil {
				return nil, err
			}
			an := answer("fp", "{}")
			return &an, nil
		})
		if err != nil {
			t.Errorf("another scope with the same key: %v", err)
		}
		an := answer("fp", "{}")
		return &an, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Write(ctx, req, func(c jobboard.Writes) (*jobboard.StoredResponse, error) {
		_, err := c.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "C"})
		return nil, err
	})
	wantErr(t, err, jobboard.ErrIdempotencyKeyInUse)
	// A commit without writes finds the answer too.
	_, err = db.Write(ctx, req, storeOnly(answer("fp", "{}")))
	wantErr(t, err, jobboard.ErrIdempotencyKeyInUse)

	if n := count(t, db, "SELECT count(*) FROM companies"); n != 1 {
		t.Errorf("companies = %d, want A's", n)
	}
	if n := count(t, db, "SELECT count(*) FROM idempotency_keys"); n != 2 {
		t.Errorf("stored answers = %d, want A's and the other scope's", n)
	}
}

// Answers older than the key's lifetime are not found, may be replaced, and
// are what the retention deletes.
func TestIdempotencyKeyExpiry(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	for _, key := range []string{"key-old-000000001", "key-old-000000002", "key-new-000000001"} {
		if _, err := db.Write(ctx, keyed("anonymous", key, "fp"), storeOnly(answer("fp", key))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key LIKE 'key-old-%'`); err != nil {
		t.Fatal(err)
	}
	_, err := db.StoredResponse(ctx, "anonymous", "key-old-000000001")
	wantErr(t, err, jobboard.ErrNotFound)

	// An expired key may be used again before the sweeper got to it.
	if _, err := db.Write(ctx, keyed("anonymous", "key-old-000000002", "fp2"), storeOnly(answer("fp2", "again"))); err != nil {
		t.Fatalf("reuse an expired key: %v", err)
	}
	got, err := db.StoredResponse(ctx, "anonymous", "key-old-000000002")
	if err != nil || string(got.Body) != "again" {
		t.Fatalf("reused key: %+v, %v", got, err)
	}

	n, err := db.DeleteExpired(ctx, jobboard.DefaultRetention, 1)
	if err != nil || n["idempotency_keys"] != 1 {
		t.Fatalf("DeleteExpired = %v, %v; want 1 idempotency key", n, err)
	}
	var left []string
	rows, err := db.Pool.Query(ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		left = append(left, k)
	}
	if len(left) != 2 || left[0] != "key-new-000000001" || left[1] != "key-old-000000002" {
		t.Fatalf("keys left = %v", left)
	}
}

// The listing version moves with every change to jobs or memberships, in
// the changing transaction, and not with reads.
func TestJobListingVersion(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	version := func() int64 {
		t.Helper()
		v, err := w.db.JobListingVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v0 := version()
	if _, err := w.db.SearchJobs(ctx, nil, jobboard.JobFilter{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Job(ctx, nil, w.job.ID); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != v0 {
		t.Fatalf("reads moved the version: %d → %d", v0, v)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"create job", func() error { _, err := w.db.CreateJob(ctx, w.employer, w.company.ID, newJob("New")); return err }},
		{"patch job", func() error {
			_, err := w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Title: ptr("Renamed")})
			return err
		}},
		{"close job", func() error { mustClose(t, w.db, w.employer, w.job.ID); return nil }},
		{"new company (membership)", func() error { mustCompany(t, w.db, mustUser(t, w.db, jobboard.RoleEmployer)); return nil }},
	}
	last := v0
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if v := version(); v <= last {
			t.Fatalf("%s: version %d, was %d", s.name, v, last)
		} else {
			last = v
		}
	}
	// A rolled-back change leaves it as it was.
	_, err := w.db.Write(ctx, keyed("user:1", "key-0000000000009", "fp"), func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
		_, err := st.CreateJob(ctx, w.employer, w.company.ID, newJob("Never"))
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := version(); v != last {
		t.Fatalf("rolled-back insert moved the version: %d → %d", last, v)
	}
}

// Every update moves updated_at (the job's entity tag) strictly forward,
// even two in one transaction, where now() is the same.
func TestUpdateJobMovesUpdatedAtForward(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	var first, second jobboard.Job
	_, err := w.db.Write(ctx, keyed("user:1", "key-0000000000010", "fp"), func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
		var err error
		if first, err = st.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Title: ptr("One")}); err != nil {
			return nil, err
		}
		if second, err = st.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Title: ptr("Two")}); err != nil {
			return nil, err
		}
		a := answer("fp", "{}")
		return &a, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !first.UpdatedAt.After(w.job.UpdatedAt) || !second.UpdatedAt.After(first.UpdatedAt) {
		t.Fatalf("updated_at %v → %v → %v, want strictly increasing", w.job.UpdatedAt, first.UpdatedAt, second.UpdatedAt)
	}
}
