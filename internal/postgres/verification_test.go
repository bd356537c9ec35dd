package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// t0 is the tests' clock: the store compares what it is given.
var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// register registers a candidate through the store as the API does and
// returns it with its verification event.
func register(t *testing.T, db *pgtest.DB, email string, p jobboard.VerificationPolicy, now time.Time) (jobboard.User, *jobboard.Event) {
	t.Helper()
	ctx := context.Background()
	u, evs, err := pgtest.Write(ctx, db.DB, func(st jobboard.Writes) (jobboard.User, error) {
		u, _, err := st.Register(ctx, jobboard.Registration{Email: email, Name: "Sam", Role: jobboard.RoleCandidate}, "hash", p, now)
		return u, err
	})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if len(evs) == 0 {
		return u, nil
	}
	return u, &evs[0]
}

// claimToken claims a verification event as the worker does and returns
// the token of its link.
func claimToken(t *testing.T, db *pgtest.DB, ev jobboard.Event, lease time.Duration) jobboard.Claim {
	t.Helper()
	c, err := db.ClaimEvent(context.Background(), ev, lease)
	if err != nil || c.Outcome != "" || !jobboard.ValidVerificationToken(c.Recipient.Token) {
		t.Fatalf("ClaimEvent = %+v, %v; want an owned claim with a token", c, err)
	}
	return c
}

func TestRegisterQueuesAVerificationEvent(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	u, ev := register(t, db, "Sam@Example.com", jobboard.DefaultVerificationPolicy, t0)
	if u.EmailVerified || u.Email != "sam@example.com" {
		t.Fatalf("registered %+v, want unverified sam@example.com", u)
	}
	if ev == nil || ev.Type != jobboard.EventTypeEmailVerificationRequested || ev.UserID != u.ID || ev.Validate() != nil {
		t.Fatalf("event %+v, want a valid verification event for user %d", ev, u.ID)
	}
	var payload []byte
	if err := db.Pool.QueryRow(context.Background(), `SELECT payload FROM outbox WHERE event_id = $1`, ev.EventID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if back, err := jobboard.DecodeEvent(payload); err != nil || !bytes.Equal(back.PayloadHash(), ev.PayloadHash()) {
		t.Fatalf("outbox payload %s (%v), want the event", payload, err)
	}
	// The email taken: nothing written, no event.
	before := count(t, db, `SELECT count(*) FROM outbox`)
	_, _, err := db.Register(context.Background(), jobboard.Registration{Email: "SAM@example.com", Name: "X", Role: jobboard.RoleEmployer},
		"hash", jobboard.DefaultVerificationPolicy, t0)
	wantErr(t, err, jobboard.ErrEmailTaken)
	if after := count(t, db, `SELECT count(*) FROM outbox`); after != before {
		t.Errorf("outbox rows %d → %d after a refused registration", before, after)
	}
}

// A token verifies once; its stored form is its SHA-256; a wrong token and
// a used one say so, and change nothing.
func TestVerificationTokenIsSingleUseAndHashedAtRest(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	u, ev := register(t, db, "ada@example.com", jobboard.DefaultVerificationPolicy, t0)
	c := claimToken(t, db, *ev, time.Minute)
	if c.Recipient.Email != u.Email || c.Recipient.UserID != u.ID {
		t.Fatalf("claim recipient %+v, want %s", c.Recipient, u.Email)
	}

	var stored []byte
	var asText string
	if err := db.Pool.QueryRow(ctx, `SELECT token_hash, t::text FROM email_verification_tokens t WHERE event_id = $1`, ev.EventID).
		Scan(&stored, &asText); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored, jobboard.HashVerificationToken(c.Recipient.Token)) || bytes.Contains([]byte(asText), []byte(c.Recipient.Token)) {
		t.Fatalf("stored row %s; want the token's SHA-256 and not the token", asText)
	}

	_, err := db.VerifyEmail(ctx, jobboard.HashVerificationToken("not-the-token"), t0)
	wantErr(t, err, jobboard.ErrVerificationTokenInvalid)
	if again, _ := db.UserByID(ctx, u.ID); again.EmailVerified {
		t.Fatal("a wrong token verified the user")
	}

	v, err := db.VerifyEmail(ctx, stored, t0.Add(time.Hour))
	if err != nil || !v.EmailVerified || v.ID != u.ID {
		t.Fatalf("VerifyEmail = %+v, %v; want user %d verified", v, err, u.ID)
	}
	_, err = db.VerifyEmail(ctx, stored, t0.Add(2*time.Hour))
	wantErr(t, err, jobboard.ErrVerificationTokenUsed)
	if got, _ := db.UserByID(ctx, u.ID); !got.EmailVerified {
		t.Fatal("UserByID does not say verified")
	}
}

// Two requests with one token at the same moment: one verifies, the other
// finds it used.
func TestVerificationTokenRace(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	_, ev := register(t, db, "race@example.com", jobboard.DefaultVerificationPolicy, t0)
	hash := jobboard.HashVerificationToken(claimToken(t, db, *ev, time.Minute).Recipient.Token)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = db.VerifyEmail(context.Background(), hash, t0) })
	}
	wg.Wait()
	ok, used := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, jobboard.ErrVerificationTokenUsed):
			used++
		default:
			t.Errorf("VerifyEmail: %v", err)
		}
	}
	if ok != 1 || used != len(errs)-1 {
		t.Errorf("%d verified, %d used; want 1 and %d", ok, used, len(errs)-1)
	}
}

// A token expires after VerificationTokenTTL (from its claim, by the
// database's clock).
func TestVerificationTokenExpires(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	u, ev := register(t, db, "late@example.com", jobboard.DefaultVerificationPolicy, t0)
	c := claimToken(t, db, *ev, time.Minute)
	if left := time.Until(c.Recipient.ExpiresAt); left < jobboard.VerificationTokenTTL-time.Minute || left > jobboard.VerificationTokenTTL {
		t.Fatalf("token expires in %v, want about %v", left, jobboard.VerificationTokenTTL)
	}
	hash := jobboard.HashVerificationToken(c.Recipient.Token)
	_, err := db.VerifyEmail(ctx, hash, c.Recipient.ExpiresAt.Add(time.Second))
	wantErr(t, err, jobboard.ErrVerificationTokenExpired)
	if got, _ := db.UserByID(ctx, u.ID); got.EmailVerified {
		t.Fatal("an expired token verified the user")
	}
	// Just before, it works.
	if _, err := db.VerifyEmail(ctx, hash, c.Recipient.ExpiresAt.Add(-time.Second)); err != nil {
		t.Fatalf("VerifyEmail before expiry: %v", err)
	}
}

// The token belongs to the claim: a released claim takes its token along,
// a take-over (the first worker's lease ran out) replaces it. Either way
// the earlier link stops working and the new one works.
func TestRetriedVerificationClaimReplacesTheToken(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	_, ev := register(t, db, "retry@example.com", jobboard.DefaultVerificationPolicy, t0)

	first := claimToken(t, db, *ev, time.Minute)
	if err := db.ReleaseClaim(ctx, ev.EventID, first.Token); err != nil {
		t.Fatal(err)
	}
	_, err := db.VerifyEmail(ctx, jobboard.HashVerificationToken(first.Recipient.Token), t0)
	wantErr(t, err, jobboard.ErrVerificationTokenInvalid)

	// A lease already run out: the next claim takes it over.
	second := claimToken(t, db, *ev, -time.Second)
	third := claimToken(t, db, *ev, time.Minute)
	if third.Attempts != 2 || third.Recipient.Token == second.Recipient.Token {
		t.Fatalf("take-over: attempts %d, same token %v; want 2 and a new token", third.Attempts, third.Recipient.Token == second.Recipient.Token)
	}
	if n := count(t, db, `SELECT count(*) FROM email_verification_tokens WHERE event_id = $1`, ev.EventID); n != 1 {
		t.Fatalf("%d tokens for the event, want 1", n)
	}
	_, err = db.VerifyEmail(ctx, jobboard.HashVerificationToken(second.Recipient.Token), t0)
	wantErr(t, err, jobboard.ErrVerificationTokenInvalid)
	if v, err := db.VerifyEmail(ctx, jobboard.HashVerificationToken(third.Recipient.Token), t0); err != nil || !v.EmailVerified {
		t.Fatalf("the current token: %+v, %v", v, err)
	}

	// A duplicate of the event now writes nothing and makes no token.
	c, err := db.ClaimEvent(ctx, *ev, time.Minute)
	if err != nil || c.Outcome != jobboard.OutcomeBusy || c.Recipient.Token != "" {
		t.Fatalf("claim during the live lease = %+v, %v; want busy, no token", c, err)
	}
}

// A verification event for a verified account, or one that is gone,
// finishes its claim at once and stores no token.
func TestVerificationClaimWithNothingToSend(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	u, ev := register(t, db, "done@example.com", jobboard.DefaultVerificationPolicy, t0)
	pgtest.MarkVerified(t, db.Pool, u.ID)
	c, err := db.ClaimEvent(ctx, *ev, time.Minute)
	if err != nil || c.Outcome != jobboard.OutcomeAlreadyVerified {
		t.Fatalf("ClaimEvent = %+v, %v; want already_verified", c, err)
	}
	missing := jobboard.Event{Type: jobboard.EventTypeEmailVerificationRequested, EventID: "e-missing", OccurredAt: t0, UserID: u.ID + 1000}
	if c, err := db.ClaimEvent(ctx, missing, time.Minute); err != nil || c.Outcome != jobboard.OutcomeUserMissing {
		t.Fatalf("ClaimEvent = %+v, %v; want user_missing", c, err)
	}
	if n := count(t, db, `SELECT count(*) FROM email_verification_tokens`); n != 0 {
		t.Errorf("%d tokens stored, want none", n)
	}
	if n := count(t, db, `SELECT count(*) FROM processed_events WHERE outcome IS NOT NULL AND finished_at IS NOT NULL`); n != 2 {
		t.Errorf("%d finished claims, want 2", n)
	}
}

// The status claim of an unverified candidate is finished in its one
// statement as recipient_unverified; a redelivery is a duplicate.
func TestStatusClaimOfUnverifiedCandidate(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	u, _ := register(t, w.db, "unverified@example.com", jobboard.DefaultVerificationPolicy, t0)
	app, err := w.db.Apply(ctx, jobboard.Actor{UserID: u.ID, Role: u.Role}, w.job.ID, jobboard.NewApplication{})
	if err != nil {
		t.Fatal(err)
	}
	_, ev, err := changeStatus(ctx, w.db, w.employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing})
	if err != nil || ev == nil {
		t.Fatalf("ChangeStatus: %v", err)
	}
	c, err := w.db.ClaimEvent(ctx, *ev, time.Minute)
	if err != nil || c.Outcome != jobboard.OutcomeRecipientUnverified {
		t.Fatalf("ClaimEvent = %+v, %v; want recipient_unverified", c, err)
	}
	if c, err := w.db.ClaimEvent(ctx, *ev, time.Minute); err != nil || c.Outcome != jobboard.OutcomeDuplicate {
		t.Fatalf("second ClaimEvent = %+v, %v; want duplicate", c, err)
	}
}

// The resend cooldown and the hourly cap per account, by the clock the
// caller gives.
func TestVerificationRequestsPerAccount(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	p := jobboard.VerificationPolicy{Cooldown: time.Minute, Window: time.Hour, PerAccount: 3, PerAddress: 10}
	u, ev := register(t, db, "cap@example.com", p, t0) // 1
	if ev == nil {
		t.Fatal("no event at registration")
	}
	throttled := func(at time.Time, bound string, wait time.Duration) {
		t.Helper()
		before := count(t, db, `SELECT count(*) FROM outbox`)
		_, err := requestVerification(ctx, db, u.ID, p, at)
		var te *jobboard.VerificationThrottledError
		if !errors.As(err, &te) || te.Bound != bound || te.RetryAfter != wait {
			t.Fatalf("at +%v: %v; want throttled by %s for %v", at.Sub(t0), err, bound, wait)
		}
		if after := count(t, db, `SELECT count(*) FROM outbox`); after != before {
			t.Fatalf("a refused request wrote %d outbox rows", after-before)
		}
	}
	accepted := func(at time.Time) {
		t.Helper()
		ev, err := requestVerification(ctx, db, u.ID, p, at)
		if err != nil || ev.UserID != u.ID {
			t.Fatalf("at +%v: %+v, %v; want a new event", at.Sub(t0), ev, err)
		}
	}
	throttled(t0.Add(10*time.Second), "cooldown", 50*time.Second)
	accepted(t0.Add(time.Minute)) // 2
	accepted(t0.Add(2 * time.Minute))
	throttled(t0.Add(3*time.Minute), "account", 57*time.Minute)
	throttled(t0.Add(time.Hour-time.Second), "account", time.Second)
	accepted(t0.Add(time.Hour)) // the first left the window
	if n := count(t, db, `SELECT count(*) FROM email_verification_requests WHERE user_id = $1`, u.ID); n != 3 {
		t.Errorf("%d requests kept, want 3 (those older than the window deleted)", n)
	}

	pgtest.MarkVerified(t, db.Pool, u.ID)
	_, err := requestVerification(ctx, db, u.ID, p, t0.Add(2*time.Hour))
	wantErr(t, err, jobboard.ErrAlreadyVerified)
	_, err = requestVerification(ctx, db, u.ID+1000, p, t0)
	wantErr(t, err, jobboard.ErrNotFound)
}

// The hourly cap per address outlives the account: a new account with the
// address is created, but gets no email while the address is over its cap.
func TestVerificationRequestsPerAddress(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	p := jobboard.VerificationPolicy{Cooldown: time.Second, Window: time.Hour, PerAccount: 10, PerAddress: 2}
	first, _ := register(t, db, "shared@example.com", p, t0)
	if _, err := requestVerification(ctx, db, first.ID, p, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}
	second, ev := register(t, db, "SHARED@example.com", p, t0.Add(2*time.Minute))
	if ev != nil {
		t.Fatalf("registration over the address's cap queued %+v", ev)
	}
	_, err := requestVerification(ctx, db, second.ID, p, t0.Add(3*time.Minute))
	var te *jobboard.VerificationThrottledError
	if !errors.As(err, &te) || te.Bound != "address" || te.RetryAfter != 57*time.Minute {
		t.Fatalf("RequestVerification = %v; want throttled by the address for 57m", err)
	}
	if _, err := requestVerification(ctx, db, second.ID, p, t0.Add(time.Hour+time.Minute)); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// Resends of one account at the same moment are counted one after the
// other: within the cooldown, exactly one is accepted.
func TestVerificationRequestsRace(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	u, _ := register(t, db, "burst@example.com", jobboard.DefaultVerificationPolicy, t0)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = requestVerification(context.Background(), db, u.ID, jobboard.DefaultVerificationPolicy, t0.Add(2*time.Minute))
		})
	}
	wg.Wait()
	accepted := 0
	for _, err := range errs {
		switch {
		case err == nil:
			accepted++
		case !errors.Is(err, jobboard.ErrVerificationThrottled):
			t.Errorf("RequestVerification: %v", err)
		}
	}
	if accepted != 1 {
		t.Errorf("%d of %d simultaneous resends accepted, want 1", accepted, len(errs))
	}
	if n := count(t, db, fmt.Sprintf(`SELECT count(*) FROM outbox WHERE payload->>'user_id' = '%d'`, u.ID)); n != 2 {
		t.Errorf("%d verification events, want 2 (registration and one resend)", n)
	}
}
