package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

type meAnswer struct {
	jobboard.User
	EmailDelivery jobboard.AddressDelivery `json:"email_delivery"`
}

// GET /v1/me says whether email reaches the account's address, and why
// not: deliverable until a hard bounce or a complaint suppresses it.
func TestMeTellsWhetherTheAddressIsDeliverable(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	u := a.register(jobboard.RoleCandidate)
	r := a.do("GET", "/v1/me", nil, bearer(u.Token))
	want(t, r, http.StatusOK)
	if me := decodeAs[meAnswer](t, r); !me.EmailDelivery.Deliverable || me.EmailDelivery.Reason != "" || me.EmailDelivery.Since != nil {
		t.Fatalf("email_delivery %+v, want deliverable", me.EmailDelivery)
	}

	at := time.Now().UTC().Truncate(time.Second)
	if _, err := a.db.ApplyFeedback(context.Background(), jobboard.Feedback{ID: "Bounce:m1:f1", Kind: jobboard.FeedbackBounced,
		MessageID: "m1", Recipients: []string{u.Email}, At: at}); err != nil {
		t.Fatal(err)
	}
	r = a.do("GET", "/v1/me", nil, bearer(u.Token))
	want(t, r, http.StatusOK)
	me := decodeAs[meAnswer](t, r)
	if me.EmailDelivery.Deliverable || me.EmailDelivery.Reason != jobboard.SuppressedByBounce || me.EmailDelivery.Since == nil || !me.EmailDelivery.Since.Equal(at) {
		t.Fatalf("email_delivery %+v, want not deliverable: bounce since %v", me.EmailDelivery, at)
	}
}

// The history shows the candidate what became of each change's email
// (pending, the mail service's latest word, or the worker's reason for
// not sending); the company sees no such field.
func TestHistoryShowsTheCandidateTheirEmails(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	path := fmt.Sprintf("/v1/applications/%d", w.application.ID)
	for _, s := range []string{"reviewing", "interview", "offer"} {
		want(t, a.do("PATCH", path, map[string]any{"status": s}, as(w.employer)), http.StatusOK)
	}
	r := a.do("GET", path+"/history", nil, as(w.candidate))
	want(t, r, http.StatusOK)
	h := decodeAs[history](t, r).Items
	if len(h) != 3 {
		t.Fatalf("history %+v", h)
	}
	ctx := context.Background()
	// The first email was delivered, then its recipient complained; the
	// second was not sent (suppressed); the third is not handled yet.
	for _, f := range []jobboard.Feedback{
		{ID: "Delivery:m1", Kind: jobboard.FeedbackDelivered, MessageID: "m1", EventID: h[0].EventID, Recipients: []string{w.candidate.Email}},
		{ID: "Complaint:m1:c", Kind: jobboard.FeedbackComplained, MessageID: "m1", EventID: h[0].EventID, Recipients: []string{w.candidate.Email}},
	} {
		if _, err := a.db.ApplyFeedback(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.db.Pool.Exec(ctx, `INSERT INTO processed_events (event_id, event_type, payload_hash, outcome, finished_at)
		VALUES ($1, 'application.status_changed', '\x00', 'sent', now()), ($2, 'application.status_changed', '\x00', 'suppressed', now())`,
		h[0].EventID, h[1].EventID); err != nil {
		t.Fatal(err)
	}

	r = a.do("GET", path+"/history", nil, as(w.candidate))
	want(t, r, http.StatusOK)
	h = decodeAs[history](t, r).Items
	wantEmail := []jobboard.EmailDelivery{{State: "complained"}, {State: "not_sent", Reason: "suppressed"}, {State: "pending"}}
	for i, e := range h {
		if e.Email == nil || *e.Email != wantEmail[i] {
			t.Errorf("entry %d: email %+v, want %+v", i, e.Email, wantEmail[i])
		}
	}

	r = a.do("GET", path+"/history", nil, as(w.employer))
	want(t, r, http.StatusOK)
	for i, e := range decodeAs[history](t, r).Items {
		if e.Email != nil {
			t.Errorf("entry %d: the company sees the candidate's email %+v", i, e.Email)
		}
	}
}
