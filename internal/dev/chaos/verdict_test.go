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

// Statuses of one application: an older one not emailed because a newer
// one was is superseded, not lost; an email after a newer status's is out
// of order, inside the window only when a frozen (or killed) worker had
// claimed it; the last email must be the latest status.
func TestJudgeOrder(t *testing.T) {
	t.Parallel()
	line := func(instance, event, outcome string) recordLine {
		return recordLine{Instance: instance, EventID: event, Outcome: outcome, LeaseToken: "L-" + event}
	}
	v := judge(evidence{
		// Application 1: a2, a3, a4; application 2: b2, b3; application
		// 3: c2, c3; application 4: d2, d3.
		Committed: map[string]int64{"a2": 1, "a3": 1, "a4": 1, "b2": 2, "b3": 2, "c2": 3, "c3": 3, "d2": 4, "d3": 4},
		Versions:  map[string]int64{"a2": 2, "a3": 3, "a4": 4, "b2": 2, "b3": 3, "c2": 2, "c3": 3, "d2": 2, "d3": 3},
		Emails:    map[string]int{"a4": 1, "a2": 1, "b3": 1, "b2": 1, "c3": 1, "c2": 1, "d3": 1},
		// a4, then a2 late (its worker was frozen); b3, then b2 late (no
		// excuse); c2, c3 in order; d3 only.
		Sequence: []string{"a4", "b3", "a2", "b2", "c2", "c3", "d3"},
		Lines: []recordLine{
			line("worker-1#1", "a2", "claimed"), line("worker-1#1", "a2", "sent"),
			line("worker-2#1", "a3", "superseded"),
			line("worker-2#1", "b2", "claimed"), line("worker-2#1", "b2", "sent"),
			line("worker-2#1", "d2", "sent"), // a line, but no superseded: lost
		},
		Disturbed: map[string]bool{"worker-1#1": true},
		DLQ:       map[string]bool{},
	})
	if diff := cmp.Diff([]string{"a3"}, v.Superseded); diff != "" {
		t.Errorf("Superseded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d2"}, v.Lost); diff != "" {
		t.Errorf("Lost (-want +got):\n%s", diff)
	}
	if len(v.OutOfOrder) != 2 {
		t.Fatalf("OutOfOrder = %+v, want a2 and b2", v.OutOfOrder)
	}
	if a, b := v.OutOfOrder[0], v.OutOfOrder[1]; a.EventID != "a2" || !a.Inside || a.Kind != "claimed by a killed or frozen worker" ||
		b.EventID != "b2" || b.Inside || !strings.Contains(b.Reason, "version 2 after version 3 of application 2") {
		t.Errorf("OutOfOrder = %+v", v.OutOfOrder)
	}
	// Application 2's last email (b2) is not its latest (b3), unexplained;
	// application 1's is explained by the window.
	if diff := cmp.Diff([]int64{2}, v.StaleLast); diff != "" {
		t.Errorf("StaleLast (-want +got):\n%s", diff)
	}
}

// The latest status is never superseded: superseded logged for it is lost.
func TestJudgeTheLatestCannotBeSuperseded(t *testing.T) {
	t.Parallel()
	v := judge(evidence{
		Committed: map[string]int64{"a2": 1, "a3": 1},
		Versions:  map[string]int64{"a2": 2, "a3": 3},
		Emails:    map[string]int{"a2": 1},
		Sequence:  []string{"a2"},
		Lines:     []recordLine{{Instance: "worker-1#1", EventID: "a3", Outcome: "superseded"}},
	})
	if diff := cmp.Diff([]string{"a3"}, v.Lost); diff != "" {
		t.Errorf("Lost (-want +got):\n%s", diff)
	}
}
