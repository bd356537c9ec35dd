package chaos

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobboard/jobboard/internal/dev/devstack"
)

func TestJudgeCountsLostParkedPhantomAndRefused(t *testing.T) {
	t.Parallel()
	v := judge(evidence{
		Committed: map[string]int64{"ok": 1, "lost": 2, "parked": 3, "refused": 4, "dup": 5},
		Refused:   map[string]bool{"refused": true, "refused-emailed": true},
		Emails:    map[string]int{"ok": 1, "dup": 2, "ghost": 1, "refused-emailed": 1},
		DLQ:       map[string]bool{"parked": true},
	})
	if diff := cmp.Diff([]string{"lost"}, v.Lost); diff != "" {
		t.Errorf("Lost (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"parked"}, v.Parked); diff != "" {
		t.Errorf("Parked (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ghost"}, v.Phantom); diff != "" {
		t.Errorf("Phantom (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"refused-emailed"}, v.RefusedEmailed); diff != "" {
		t.Errorf("RefusedEmailed (-want +got):\n%s", diff)
	}
	if len(v.Duplicates) != 1 || v.Duplicates[0].EventID != "dup" || v.Duplicates[0].Emails != 2 || v.Duplicates[0].Inside {
		t.Errorf("Duplicates = %+v, want dup outside the window", v.Duplicates)
	}
}

func TestClassifyDuplicates(t *testing.T) {
	t.Parallel()
	line := func(instance string, seq int, outcome, lease string) recordLine {
		return recordLine{Instance: instance, Seq: seq, EventID: "e", Outcome: outcome, LeaseToken: lease}
	}
	tests := []struct {
		name      string
		lines     []recordLine
		disturbed map[string]bool
		resets    int
		inside    bool
		kind      string
		reason    string // a part of the reason
	}{
		{
			name:   "ambiguous send logged",
			lines:  []recordLine{line("worker-1#1", 3, "ambiguous_send", "L1"), line("worker-2#1", 9, "sent", "L2")},
			inside: true, kind: "logged ambiguous_send", reason: "worker-1#1 logged ambiguous_send",
		},
		{
			name:   "lease lost logged",
			lines:  []recordLine{line("worker-1#1", 3, "lease_lost", "L1")},
			inside: true, kind: "logged lease_lost",
		},
		{
			name:   "mark failed logged",
			lines:  []recordLine{line("worker-1#1", 3, "mark_failed", "L1")},
			inside: true, kind: "logged mark_failed",
		},
		{
			name:      "claimed by a killed worker that said nothing more",
			lines:     []recordLine{line("worker-1#1", 3, "claimed", "L1"), line("worker-2#1", 1, "claimed", "L2"), line("worker-2#1", 2, "sent", "L2")},
			disturbed: map[string]bool{"worker-1#1": true},
			inside:    true, kind: "claimed by a killed or frozen worker", reason: "worker-1#1 claimed it (lease L1)",
		},
		{
			name: "claimed by a killed worker that finished that claim first",
			lines: []recordLine{line("worker-1#1", 3, "claimed", "L1"), line("worker-1#1", 4, "sent", "L1"),
				line("worker-2#1", 1, "claimed", "L2"), line("worker-2#1", 2, "sent", "L2")},
			disturbed: map[string]bool{"worker-1#1": true},
			inside:    false, kind: "outside", reason: "claimed×2, sent×2",
		},
		{
			name: "a later line about another lease does not close the claim",
			lines: []recordLine{line("worker-1#1", 3, "claimed", "L1"), line("worker-1#1", 8, "duplicate", "L9"),
				line("worker-2#1", 2, "sent", "L2")},
			disturbed: map[string]bool{"worker-1#1": true},
			inside:    true, kind: "claimed by a killed or frozen worker",
		},
		{
			name:   "claimed by a worker nobody disturbed",
			lines:  []recordLine{line("worker-1#1", 3, "claimed", "L1"), line("worker-2#1", 2, "sent", "L2")},
			inside: false, kind: "outside",
		},
		{
			name:   "the SES proxy reset an accepted send",
			lines:  []recordLine{line("worker-1#1", 3, "send_failed", ""), line("worker-1#1", 9, "sent", "")},
			resets: 1, inside: true, kind: "SES reset after acceptance", reason: "reset 1 accepted",
		},
		{
			name: "today's worker: the session ended after the send",
			lines: []recordLine{{Instance: "worker-1#1", Seq: 3, EventID: "e", Outcome: "store_error", SESID: "ses-1"},
				line("worker-2#1", 9, "sent", "")},
			inside: false, kind: "outside", reason: "sent×1, store_error×1 (a store_error after SES accepted the email)",
		},
		{
			name:   "no line at all",
			inside: false, kind: "outside", reason: "no worker line",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inside, kind, reason := classify(tt.lines, tt.disturbed, tt.resets)
			if inside != tt.inside || kind != tt.kind || !strings.Contains(reason, tt.reason) {
				t.Errorf("classify = %v, %q, %q; want %v, %q, reason containing %q", inside, kind, reason, tt.inside, tt.kind, tt.reason)
			}
		})
	}
}

func TestJudgeUsesTheLinesOfTheEventOnly(t *testing.T) {
	t.Parallel()
	v := judge(evidence{
		Committed: map[string]int64{"a": 1, "b": 2},
		Emails:    map[string]int{"a": 2, "b": 3},
		Lines: []recordLine{
			{Instance: "worker-1#1", EventID: "a", Outcome: "ambiguous_send"},
			{Instance: "worker-1#1", EventID: "b", Outcome: "sent"},
		},
	})
	want := []duplicate{
		{EventID: "a", Emails: 2, Inside: true, Kind: "logged ambiguous_send", Reason: "worker-1#1 logged ambiguous_send"},
		{EventID: "b", Emails: 3, Inside: false, Kind: "outside", Reason: "sent×1"},
	}
	if diff := cmp.Diff(want, v.Duplicates); diff != "" {
		t.Errorf("Duplicates (-want +got):\n%s", diff)
	}
}

// The harness's queue gives up on a message after as many receives as the
// deployed one: the worker's backoffs are tuned to it.
func TestQueueReceivesMatchTheTemplate(t *testing.T) {
	t.Parallel()
	q, err := devstack.QueueFromTemplate("../../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{Short(), Full()} {
		if c.MaxReceiveCount != q.MaxReceiveCount {
			t.Errorf("%s: MaxReceiveCount %d, template.yaml %d", c.Name, c.MaxReceiveCount, q.MaxReceiveCount)
		}
	}
}
