package chaos

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/mail"
)

func TestJudgeLeavesSuppressedEventsOutOfTheLost(t *testing.T) {
	t.Parallel()
	v := judge(evidence{
		Committed:  map[string]int64{"ok": 1, "lost": 2, "suppressed": 3},
		Emails:     map[string]int{"ok": 1},
		Suppressed: map[string]bool{"suppressed": true},
	})
	if diff := cmp.Diff([]string{"lost"}, v.Lost); diff != "" {
		t.Errorf("Lost (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"suppressed"}, v.Suppressed); diff != "" {
		t.Errorf("Suppressed (-want +got):\n%s", diff)
	}
}

// An email to a suppressed address is inside the window when the claim
// that sent it came before the suppression was recorded, outside when it
// came after; emails of the seconds before the suppression are not late.
func TestLateEmailsAreJudgedByTheirClaim(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 3, 10, 0, 0, 500_000_000, time.UTC)
	email := func(event, sesID string, at time.Time) localaws.Email {
		return localaws.Email{MessageID: sesID, Destination: localaws.Destination{To: []string{"Bounce+1@simulator.amazonses.com"}},
			Headers: []localaws.Header{{Name: mail.EventIDHeader, Value: event}}, At: at.Unix()}
	}
	emails := []localaws.Email{
		email("early", "s0", since.Add(-2*time.Second)),
		email("window", "s1", since),
		email("violation", "s2", since.Add(3*time.Second)),
		email("unknown", "s3", since.Add(time.Second)),
	}
	lines := []recordLine{
		{Instance: "worker-1#1", EventID: "window", Outcome: "claimed", LeaseToken: "l1", Time: since.Add(-time.Millisecond)},
		{Instance: "worker-1#1", EventID: "window", Outcome: "sent", LeaseToken: "l1", SESID: "s1"},
		{Instance: "worker-2#1", EventID: "violation", Outcome: "claimed", LeaseToken: "l2", Time: since.Add(time.Second)},
		{Instance: "worker-2#1", EventID: "violation", Outcome: "sent", LeaseToken: "l2", SESID: "s2"},
	}
	committed := map[string]int64{"early": 1, "window": 1, "violation": 1, "unknown": 1}
	f := feedbackEvidence{Suppressions: map[string]time.Time{"bounce+1@simulator.amazonses.com": since}}
	got := map[string]bool{}
	for _, l := range lateEmails(emails, committed, f, lines) {
		got[l.EventID] = l.Inside
	}
	if diff := cmp.Diff(map[string]bool{"window": true, "violation": false, "unknown": true}, got); diff != "" {
		t.Errorf("late emails, inside (-want +got):\n%s", diff)
	}
}
