package postgres_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func keyed(scope, key, fp string) jobboard.IdempotentRequest {
	return jobboard.IdempotentRequest{Scope: scope, Key: key, Fingerprint: []byte(fp)}
}

func answer(fp, body string) jobboard.StoredResponse {
	return jobboard.StoredResponse{Fingerprint: []byte(fp), Status: 201,
		Header: map[string]string{"Location": "/v1/companies/1"}, Body: []byte(body)}
}

// The answer commits with the writes made in the keyed write's context, and
// is found afterwards under its scope and key only.
func TestIdempotentWriteCommitsAnswerWithWrites(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	employer := mustUser(t, db, jobboard.RoleEmployer)

	wctx, w := db.BeginIdempotent(ctx, keyed("user:1", "key-0000000000001", "fp"))
	c, err := db.CreateCompany(wctx, employer, jobboard.NewCompany{Name: "Keyed"})
	if err != nil {
		t.Fatal(err)
	}
	// Not visible outside the transaction before the commit.
	if n := count(t, db, "SELECT count(*) FROM companies WHERE id = $1", c.ID); n != 0 {
		t.Fatalf("company visible before commit")
	}
	if _, err := db.StoredResponse(ctx, "user:1", "key-0000000000001"); err == nil {
		t.Fatal("answer visible before commit")
	}
	if err := w.Commit(wctx, answer("fp", `{"id":1}`)); err != nil {
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

	// After the commit, the context writes on its own again.
	if _, err := db.CreateCompany(wctx, employer, jobboard.NewCompany{Name: "After"}); err != nil {
		t.Fatalf("write with an ended keyed context: %v", err)
	}
	if n := count(t, db, "SELECT count(*) FROM companies"); n != 2 {
		t.Fatalf("companies = %d, want 2", n)
	}
}

// A rollback leaves neither the writes nor an answer.
func TestIdempotentWriteRollback(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	wctx, write := w.db.BeginIdempotent(ctx, keyed("user:1", "key-0000000000002", "fp"))
	if _, err := w.db.CreateJob(wctx, w.employer, w.company.ID, newJob("Rolled back")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Apply(wctx, w.candidate, w.job.ID, jobboard.NewApplication{}); err != nil {
		t.Fatal(err)
	}
	write.Rollback(wctx)
	write.Rollback(wctx) // twice is harmless
	if n := count(t, w.db, "SELECT count(*) FROM jobs"); n != 1 {
		t.Errorf("jobs = %d, want the world's 1", n)
	}
	if n := count(t, w.db, "SELECT count(*) FROM applications"); n != 0 {
		t.Errorf("applications = %d, want 0", n)
	}
	if n := count(t, w.db, "SELECT count(*) FROM idempotency_keys"); n != 0 {
		t.Errorf("stored answers = %d, want 0", n)
	}
	if err := write.Commit(wctx, answer("fp", "{}")); err == nil {
		t.Error("Commit after Rollback succeeded")
	}
}

// While one keyed write holds a key, a second one's first write fails at
// once with ErrIdempotencyKeyInUse (it does not wait), and so does it after
// the first has stored its answer. Another scope is not affected.
func TestIdempotentWriteKeyInUse(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	employer := mustUser(t, db, jobboard.RoleEmployer)
	req := keyed("user:1", "key-0000000000003", "fp")

	actx, a := db.BeginIdempotent(ctx, req)
	if _, err := db.CreateCompany(actx, employer, jobboard.NewCompany{Name: "A"}); err != nil {
		t.Fatal(err)
	}
	bctx, b := db.BeginIdempotent(ctx, req)
	start := time.Now()
	_, err := db.CreateCompany(bctx, employer, jobboard.NewCompany{Name: "B"})
	wantErr(t, err, jobboard.ErrIdempotencyKeyInUse)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the second writer waited %v", d)
	}
	b.Rollback(bctx)

	// (A user, not a company: A's company holds the listing version's row
	// until A commits, and this test runs A and the other on one goroutine.)
	other, o := db.BeginIdempotent(ctx, keyed("user:2", "key-0000000000003", "fp"))
	if _, err := db.CreateUser(other, jobboard.Registration{Email: "other@example.com", Name: "O", Role: jobboard.RoleCandidate}, "hash"); err != nil {
		t.Fatalf("another scope with the same key: %v", err)
	}
	if err := o.Commit(other, answer("fp", "{}")); err != nil {
		t.Fatal(err)
	}

	if err := a.Commit(actx, answer("fp", "{}")); err != nil {
		t.Fatal(err)
	}
	cctx, c := db.BeginIdempotent(ctx, req)
	_, err = db.CreateCompany(cctx, employer, jobboard.NewCompany{Name: "C"})
	wantErr(t, err, jobboard.ErrIdempotencyKeyInUse)
	c.Rollback(cctx)
	// A commit without writes finds the answer too.
	dctx, d := db.BeginIdempotent(ctx, req)
	wantErr(t, d.Commit(dctx, answer("fp", "{}")), jobboard.ErrIdempotencyKeyInUse)

	if n := count(t, db, "SELECT count(*) FROM companies"); n != 1 {
		t.Errorf("companies = %d, want A's", n)
	}
	if n := count(t, db, "SELECT count(*) FROM users WHERE email = 'other@example.com'"); n != 1 {
		t.Errorf("the other scope's user rows = %d, want 1", n)
	}
}

// Answers older than the key's lifetime are not found, may be replaced, and
// are what DeleteExpiredIdempotencyKeys deletes.
func TestIdempotencyKeyExpiry(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	for _, key := range []string{"key-old-000000001", "key-old-000000002", "key-new-000000001"} {
		wctx, w := db.BeginIdempotent(ctx, keyed("anonymous", key, "fp"))
		if err := w.Commit(wctx, answer("fp", key)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key LIKE 'key-old-%'`); err != nil {
		t.Fatal(err)
	}
	_, err := db.StoredResponse(ctx, "anonymous", "key-old-000000001")
	wantErr(t, err, jobboard.ErrNotFound)

	// An expired key may be used again before the sweeper got to it.
	wctx, w := db.BeginIdempotent(ctx, keyed("anonymous", "key-old-000000002", "fp2"))
	if err := w.Commit(wctx, answer("fp2", "again")); err != nil {
		t.Fatalf("reuse an expired key: %v", err)
	}
	got, err := db.StoredResponse(ctx, "anonymous", "key-old-000000002")
	if err != nil || string(got.Body) != "again" {
		t.Fatalf("reused key: %+v, %v", got, err)
	}

	n, err := db.DeleteExpiredIdempotencyKeys(ctx, jobboard.IdempotencyKeyTTL, 1)
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpiredIdempotencyKeys = %d, %v; want 1", n, err)
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
	wctx, write := w.db.BeginIdempotent(ctx, keyed("user:1", "key-0000000000009", "fp"))
	if _, err := w.db.CreateJob(wctx, w.employer, w.company.ID, newJob("Never")); err != nil {
		t.Fatal(err)
	}
	write.Rollback(wctx)
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
	wctx, write := w.db.BeginIdempotent(ctx, keyed("user:1", "key-0000000000010", "fp"))
	first, err := w.db.UpdateJob(wctx, w.employer, w.job.ID, jobboard.JobPatch{Title: ptr("One")})
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.db.UpdateJob(wctx, w.employer, w.job.ID, jobboard.JobPatch{Title: ptr("Two")})
	if err != nil {
		t.Fatal(err)
	}
	if err := write.Commit(wctx, answer("fp", "{}")); err != nil {
		t.Fatal(err)
	}
	if !first.UpdatedAt.After(w.job.UpdatedAt) || !second.UpdatedAt.After(first.UpdatedAt) {
		t.Fatalf("updated_at %v → %v → %v, want strictly increasing", w.job.UpdatedAt, first.UpdatedAt, second.UpdatedAt)
	}
}
