package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func bounce(id, messageID string, kind jobboard.FeedbackKind, to ...string) jobboard.Feedback {
	return jobboard.Feedback{ID: id, Kind: kind, MessageID: messageID, Recipients: to,
		At: time.Now().UTC().Truncate(time.Microsecond), Detail: "test"}
}

func TestFeedbackDeliveredTwiceSuppressesOnce(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	for _, tc := range []struct {
		kind   jobboard.FeedbackKind
		reason jobboard.SuppressionReason
	}{
		{jobboard.FeedbackBounced, jobboard.SuppressedByBounce},
		{jobboard.FeedbackComplained, jobboard.SuppressedByComplaint},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			addr := fmt.Sprintf("gone-%s@example.com", tc.kind)
			f := bounce("Bounce:m-"+string(tc.kind)+":fb1", "m-"+string(tc.kind), tc.kind, "  Gone-"+string(tc.kind)+"@Example.com")
			// Two copies at the same instant, then a third later: one applies.
			var (
				wg      sync.WaitGroup
				results = make([]jobboard.FeedbackResult, 3)
				errs    = make([]error, 3)
			)
			for i := range 2 {
				wg.Go(func() { results[i], errs[i] = db.ApplyFeedback(ctx, f) })
			}
			wg.Wait()
			results[2], errs[2] = db.ApplyFeedback(ctx, f)
			applied := 0
			for i, r := range results {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if !r.Duplicate {
					applied++
					if !slices.Equal(r.Suppressed, []string{addr}) {
						t.Errorf("suppressed = %v, want [%s]", r.Suppressed, addr)
					}
				} else if len(r.Suppressed) != 0 {
					t.Errorf("a duplicate suppressed %v", r.Suppressed)
				}
			}
			if applied != 1 {
				t.Fatalf("applied %d times, want once", applied)
			}
			s, found, err := db.Suppression(ctx, "GONE-"+string(tc.kind)+"@example.com ")
			if err != nil || !found {
				t.Fatalf("Suppression: %v, found %v", err, found)
			}
			if s.Reason != tc.reason || s.SESMessageID != f.MessageID {
				t.Errorf("suppression = %+v, want reason %s by %s", s, tc.reason, f.MessageID)
			}
			var rows int
			if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM email_suppressions WHERE email = $1`, addr).Scan(&rows); err != nil || rows != 1 {
				t.Errorf("suppression rows = %d (%v), want 1", rows, err)
			}
		})
	}
}

func TestSoftBouncesAreCountedNotSuppressing(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	for i := range 3 {
		f := bounce(fmt.Sprintf("Bounce:soft:%d", i), fmt.Sprintf("soft-%d", i), jobboard.FeedbackSoftBounced, "full@example.com")
		r, err := db.ApplyFeedback(ctx, f)
		if err != nil || r.Duplicate || len(r.Suppressed) != 0 {
			t.Fatalf("soft bounce %d: %+v, %v", i, r, err)
		}
		if _, err := db.ApplyFeedback(ctx, f); err != nil { // a copy: not counted again
			t.Fatal(err)
		}
	}
	if _, found, err := db.Suppression(ctx, "full@example.com"); err != nil || found {
		t.Fatalf("a soft bounce suppressed the address (found %v, %v)", found, err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT bounces FROM email_soft_bounces WHERE email = 'full@example.com'`).Scan(&n); err != nil || n != 3 {
		t.Errorf("soft bounces = %d (%v), want 3", n, err)
	}
}

func TestComplaintOutranksBounce(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	steps := []struct {
		f    jobboard.Feedback
		want jobboard.SuppressionReason
		new  bool
	}{
		{bounce("b1", "m1", jobboard.FeedbackBounced, "x@example.com"), jobboard.SuppressedByBounce, true},
		{bounce("c1", "m2", jobboard.FeedbackComplained, "x@example.com"), jobboard.SuppressedByComplaint, true},
		{bounce("b2", "m3", jobboard.FeedbackBounced, "x@example.com"), jobboard.SuppressedByComplaint, false},
	}
	for i, s := range steps {
		r, err := db.ApplyFeedback(ctx, s.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(r.Suppressed) == 1; got != s.new {
			t.Errorf("step %d: suppressed %v, want a new suppression: %v", i, r.Suppressed, s.new)
		}
		sup, _, err := db.Suppression(ctx, "x@example.com")
		if err != nil || sup.Reason != s.want {
			t.Errorf("step %d: reason %q (%v), want %q", i, sup.Reason, err, s.want)
		}
	}
}

func TestDeliveryStateOnlyMovesUp(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	// Out of order: the complaint before the delivery and the send.
	for i, f := range []jobboard.Feedback{
		bounce("Complaint:m:1", "m", jobboard.FeedbackComplained, "y@example.com"),
		bounce("Delivery:m", "m", jobboard.FeedbackDelivered, "y@example.com"),
		bounce("Send:m", "m", jobboard.FeedbackSent, "y@example.com"),
	} {
		f.EventID = "ev-1"
		if _, err := db.ApplyFeedback(ctx, f); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
	}
	var state, event string
	if err := db.Pool.QueryRow(ctx, `SELECT state, event_id FROM email_deliveries WHERE ses_message_id = 'm'`).Scan(&state, &event); err != nil {
		t.Fatal(err)
	}
	if state != "complained" || event != "ev-1" {
		t.Errorf("delivery = %s of %s, want complained of ev-1", state, event)
	}
}
