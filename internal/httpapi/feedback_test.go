package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

type meAnswer struct {
	jobboard.User
	EmailDelivery jobboard.AddressDelivery `json:"email_delivery"`
}

// GET /v1/me says whether email reaches the account's address, and to an
// account that verified it why not: deliverable until a hard bounce or a
// complaint suppresses it.
func TestMeTellsWhetherTheAddressIsDeliverable(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	u := a.register(jobboard.RoleCandidate)
	want(t, a.do("POST", "/v1/auth/verify-email", map[string]any{"token": a.verificationToken(u)}), http.StatusOK)
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

const resumePath = "/v1/me/email-delivery/resume"

// withdrawal is the body of POST /v1/me/email-delivery/resume that lifts a
// complaint.
var withdrawal = map[string]any{"withdraw_complaint": true}

// complain records a spam complaint about addr, as the feedback function
// would.
func (a *api) complain(kind jobboard.FeedbackKind, addr string) {
	a.t.Helper()
	id := fmt.Sprintf("%s:%s:%d", kind, addr, emailSeq.Add(1))
	if _, err := a.db.ApplyFeedback(context.Background(), jobboard.Feedback{ID: id, Kind: kind, MessageID: "m-" + id,
		Recipients: []string{addr}, At: time.Now()}); err != nil {
		a.t.Fatal(err)
	}
}

// The owner of an address that complained withdraws the complaint, once
// they have followed a verification link sent since it: the answer and
// GET /v1/me say email reaches it again; a second call finds nothing to
// lift (409) and changes nothing, while a retry with the same
// Idempotency-Key replays the first answer.
func TestOwnerWithdrawsTheirComplaint(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	u := a.register(jobboard.RoleCandidate)
	want(t, a.do("POST", "/v1/auth/verify-email", map[string]any{"token": a.verificationToken(u)}), http.StatusOK)
	a.complain(jobboard.FeedbackComplained, u.Email)
	r := a.do("GET", "/v1/me", nil, as(u))
	want(t, r, http.StatusOK)
	if d := decodeAs[meAnswer](t, r).EmailDelivery; d.Deliverable || d.Reason != jobboard.SuppressedByComplaint {
		t.Fatalf("email_delivery before %+v, want the complaint", d)
	}
	// Verified before the complaint: not enough. The account may ask for a
	// new link (a complaint after its verification opens the flow again),
	// and following it is.
	wantProblem(t, a.do("POST", resumePath, withdrawal, as(u)), http.StatusConflict, "verification-required")
	clk.advance(2 * time.Minute) // past the resend's cooldown
	want(t, a.do("POST", "/v1/auth/resend-verification", nil, as(u)), http.StatusAccepted)
	want(t, a.do("POST", "/v1/auth/verify-email", map[string]any{"token": a.verificationToken(u)}), http.StatusOK)

	r = a.do("POST", resumePath, withdrawal, as(u), withKey("withdraw-complaint-1"))
	want(t, r, http.StatusOK)
	if d := decodeAs[jobboard.AddressDelivery](t, r); !d.Deliverable || d.Reason != "" || d.Since != nil {
		t.Fatalf("answer %+v, want deliverable", d)
	}
	r = a.do("GET", "/v1/me", nil, as(u))
	if d := decodeAs[meAnswer](t, r).EmailDelivery; !d.Deliverable {
		t.Fatalf("email_delivery after %+v, want deliverable", d)
	}
	var logged bool
	for _, l := range logLines(t, a.logs) {
		logged = logged || (l["level"] == "INFO" && l["user_id"] == float64(u.ID) && l["msg"] == "complaint withdrawn by the address's owner: email resumes")
	}
	if !logged {
		t.Error("no INFO line for the withdrawal")
	}

	replay := a.do("POST", resumePath, withdrawal, as(u), withKey("withdraw-complaint-1"))
	want(t, replay, http.StatusOK)
	if replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry with the key: Idempotent-Replayed %q, want true", replay.Header.Get("Idempotent-Replayed"))
	}
	wantProblem(t, a.do("POST", resumePath, withdrawal, as(u)), http.StatusConflict, "not-suppressed")

	// A complaint that comes after the withdrawal suppresses again: the
	// withdrawal lifted what there was, it is no standing permission.
	a.complain(jobboard.FeedbackComplained, u.Email)
	if d := decodeAs[meAnswer](t, a.do("GET", "/v1/me", nil, as(u))).EmailDelivery; d.Reason != jobboard.SuppressedByComplaint {
		t.Fatalf("email_delivery after a new complaint %+v, want the complaint", d)
	}
}

// Only the owner of the address lifts its complaint: another account's
// call finds nothing of its own to lift and leaves it; a bounce is not
// lifted by a withdrawn complaint; the statement must be made; a caller
// who is not signed in, or whose session a password reset ended, is
// refused. None of them changes anything.
func TestWithdrawingAComplaintIsTheOwnersAlone(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	owner, other, bounced := a.register(jobboard.RoleCandidate), a.register(jobboard.RoleEmployer), a.register(jobboard.RoleCandidate)
	a.complain(jobboard.FeedbackComplained, owner.Email)
	a.complain(jobboard.FeedbackBounced, bounced.Email)
	suppressions := func() string {
		t.Helper()
		var s string
		if err := a.db.Pool.QueryRow(context.Background(),
			`SELECT string_agg(email || ':' || reason, ',' ORDER BY email) FROM email_suppressions`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := suppressions()

	wantProblem(t, a.do("POST", resumePath, withdrawal, as(other)), http.StatusConflict, "not-suppressed")
	p := wantProblem(t, a.do("POST", resumePath, withdrawal, as(bounced)), http.StatusConflict, "suppressed-by-bounce")
	if !strings.Contains(p.Detail, "resend-verification") {
		t.Errorf("detail %q does not say how a bounce is lifted", p.Detail)
	}
	for _, body := range []any{map[string]any{"withdraw_complaint": false}, map[string]any{}} {
		p := wantProblem(t, a.do("POST", resumePath, body, as(owner)), http.StatusUnprocessableEntity, "validation")
		if f := p.fields(); len(f) != 1 || f[0] != "withdraw_complaint" {
			t.Errorf("body %v: fields %v, want withdraw_complaint", body, f)
		}
	}
	wantProblem(t, a.do("POST", resumePath, map[string]any{"withdraw_complaint": true, "email": other.Email}, as(owner)),
		http.StatusBadRequest, "bad-request")
	r := a.do("POST", resumePath, withdrawal)
	wantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
	if r.Header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	wantProblem(t, a.do("POST", resumePath, withdrawal, bearer("not-a-token")), http.StatusUnauthorized, "unauthenticated")

	// A password reset ends the owner's session: the old token lifts
	// nothing.
	if _, err := a.db.Pool.Exec(context.Background(),
		`UPDATE users SET password_changed_at = now() + interval '1 minute' WHERE id = $1`, owner.ID); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, a.do("POST", resumePath, withdrawal, as(owner)), http.StatusUnauthorized, "unauthenticated")

	if after := suppressions(); after != before {
		t.Fatalf("suppressions %q, want them unchanged: %q", after, before)
	}
}

// Having the address is not owning it: an account registered with an
// address whose owner complained (never verified, as anyone's can be)
// does not see the complaint in GET /v1/me, only that email does not
// reach the address, and cannot lift it; neither can an account that
// verified the address before the complaint until it verifies again.
func TestAComplaintIsLiftedOnlyAfterAVerificationSinceIt(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	squatter := a.register(jobboard.RoleEmployer)
	a.complain(jobboard.FeedbackComplained, squatter.Email)

	r := a.do("GET", "/v1/me", nil, as(squatter))
	want(t, r, http.StatusOK)
	if d := decodeAs[meAnswer](t, r).EmailDelivery; d.Deliverable || d.Reason != "" || d.Since != nil {
		t.Errorf("email_delivery of an unverified account %+v, want not deliverable without why or since when", d)
	}
	if strings.Contains(string(r.Body), "complaint") {
		t.Errorf("GET /v1/me tells an unverified account of the complaint: %s", r.Body)
	}
	wantProblem(t, a.do("POST", resumePath, withdrawal, as(squatter)), http.StatusConflict, "verification-required")
	var reason string
	if err := a.db.Pool.QueryRow(context.Background(), `SELECT reason FROM email_suppressions WHERE email = $1`, squatter.Email).Scan(&reason); err != nil || reason != "complaint" {
		t.Fatalf("suppression after the refused withdrawal: %q, %v; want the complaint kept", reason, err)
	}
}
