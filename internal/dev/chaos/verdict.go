package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// evidence is what the verdict is drawn from, all of it read after the
// system settled.
type evidence struct {
	// Committed maps the event id of every committed status change to its
	// application (the history table).
	Committed map[string]int64
	// Refused are the events the retention probe made too old to send:
	// they must never be emailed and do not count as lost.
	Refused map[string]bool
	// Emails counts the emails per event id (the SES stand-in's store,
	// by the X-Jobboard-Event-Id header).
	Emails map[string]int
	// DLQ holds the event ids of the messages in the dead-letter queue.
	DLQ map[string]bool
	// Lines are the workers' record log lines.
	Lines []recordLine
	// Disturbed are the worker instances the harness killed or froze.
	Disturbed map[string]bool
	// Resets counts, per event id, the SendEmail calls the SES proxy reset
	// after the stand-in had accepted them.
	Resets map[string]int
	// Suppressed are the events whose claim finished as suppressed: not
	// emailed, by design (the address bounced or complained).
	Suppressed map[string]bool
	// Versions maps the event id of every committed status change to the
	// version it made (its place in the application's history, plus one).
	Versions map[string]int64
	// Sequence lists the event ids of the status emails in the order the
	// SES stand-in accepted them.
	Sequence []string
}

// duplicate is an event emailed more than once, judged against the
// documented window.
type duplicate struct {
	EventID string `json:"event_id"`
	Emails  int    `json:"emails"`
	Inside  bool   `json:"inside"`
	// Kind groups the reasons: "logged ambiguous_send", "claimed by a
	// killed or frozen worker", "SES reset after acceptance", "outside".
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// verdict is what the evidence shows.
type verdict struct {
	// Lost: committed, never emailed, not in the DLQ, not refused, not
	// suppressed.
	Lost []string
	// Suppressed: committed, not emailed because the address is suppressed.
	Suppressed []string
	// Parked: committed, never emailed, in the DLQ (visible to operators).
	Parked []string
	// Duplicates, sorted by event id.
	Duplicates []duplicate
	// Phantom: emails whose event id never committed.
	Phantom []string
	// RefusedEmailed: refused events that were emailed anyway.
	RefusedEmailed []string
	// Superseded: committed, never emailed, a worker logged superseded
	// for it, and a newer change of its application committed.
	Superseded []string
	// OutOfOrder: emails that reached a candidate after the email of a
	// newer status of the same application, judged against the window.
	OutOfOrder []duplicate
	// StaleLast: applications whose last email is not about their latest
	// change, though that change was emailed (or is in the DLQ), with no
	// out-of-order email inside the window to explain it.
	StaleLast []int64
}

// Outcomes that put an event inside the documented window: the worker
// itself says the send may have happened without being recorded.
var windowOutcomes = map[string]bool{"ambiguous_send": true, "lease_lost": true, "mark_failed": true}

// judge counts lost and duplicate events and classifies each duplicate.
// An event emailed twice is inside the window when
//   - a worker logged ambiguous_send, lease_lost or mark_failed for it, or
//   - a worker instance that the harness killed or froze logged
//     outcome=claimed for it and nothing later with the same lease_token, or
//   - the SES proxy reset a SendEmail for it after the stand-in accepted it.
//
// Anything else is outside the window.
func judge(e evidence) verdict {
	var v verdict
	byEvent := map[string][]recordLine{}
	for _, l := range e.Lines {
		byEvent[l.EventID] = append(byEvent[l.EventID], l)
	}
	latest := map[int64]int64{} // application → its highest committed version
	for id, app := range e.Committed {
		latest[app] = max(latest[app], e.Versions[id])
	}
	for _, id := range sortedKeys(e.Committed) {
		if e.Refused[id] || e.Emails[id] > 0 {
			continue
		}
		switch {
		case e.Suppressed[id]:
			v.Suppressed = append(v.Suppressed, id)
		case e.DLQ[id]:
			v.Parked = append(v.Parked, id)
		case e.Versions[id] < latest[e.Committed[id]] && slices.ContainsFunc(byEvent[id], func(l recordLine) bool {
			return l.Outcome == "superseded"
		}):
			v.Superseded = append(v.Superseded, id)
		default:
			v.Lost = append(v.Lost, id)
		}
	}
	v.OutOfOrder, v.StaleLast = judgeOrder(e, byEvent, latest)
	for _, id := range sortedKeys(e.Emails) {
		n := e.Emails[id]
		switch {
		case e.Refused[id]:
			v.RefusedEmailed = append(v.RefusedEmailed, id)
			continue
		case func() bool { _, ok := e.Committed[id]; return !ok }():
			v.Phantom = append(v.Phantom, id)
			continue
		case n < 2:
			continue
		}
		d := duplicate{EventID: id, Emails: n}
		d.Inside, d.Kind, d.Reason = classify(byEvent[id], e.Disturbed, e.Resets[id])
		v.Duplicates = append(v.Duplicates, d)
	}
	return v
}

// judgeOrder walks each application's emails in the order SES accepted
// them: an email about an older version than one before it is out of
// order. It is inside the window when the older event was claimed by a
// worker that the harness killed or froze (its lease could run out
// before it sent, and a newer event take the order meanwhile), or a
// worker logged ambiguous_send, lease_lost or mark_failed for it.
// Anything else is outside. An application whose last email is not its
// latest change, though that change was emailed or parked, with no
// out-of-order email inside the window, is stale.
func judgeOrder(e evidence, byEvent map[string][]recordLine, latest map[int64]int64) (outOfOrder []duplicate, stale []int64) {
	highest := map[int64]int64{} // application → the highest version emailed so far
	last := map[int64]string{}   // application → the event of its last email
	explained := map[int64]bool{}
	for _, id := range e.Sequence {
		app, ok := e.Committed[id]
		if !ok {
			continue // a phantom, counted apart
		}
		version := e.Versions[id]
		if version < highest[app] {
			d := duplicate{EventID: id, Emails: e.Emails[id]}
			d.Inside, d.Kind, d.Reason = classifyOrder(byEvent[id], e.Disturbed)
			d.Reason = fmt.Sprintf("version %d after version %d of application %d: %s", version, highest[app], app, d.Reason)
			outOfOrder = append(outOfOrder, d)
			explained[app] = explained[app] || d.Inside
		}
		highest[app] = max(highest[app], version)
		last[app] = id
	}
	for _, app := range slices.Sorted(maps.Keys(last)) {
		if e.Versions[last[app]] == latest[app] || explained[app] {
			continue
		}
		// The latest change not emailed at all is counted as lost or
		// parked; here it was emailed, and something older came after.
		for id, a := range e.Committed {
			if a == app && e.Versions[id] == latest[app] && (e.Emails[id] > 0 || e.DLQ[id]) {
				stale = append(stale, app)
				break
			}
		}
	}
	return outOfOrder, stale
}

// classifyOrder says whether an email that arrived after a newer status's
// is inside the window, and why.
func classifyOrder(lines []recordLine, disturbed map[string]bool) (inside bool, kind, reason string) {
	for _, l := range lines {
		if windowOutcomes[l.Outcome] {
			return true, "logged " + l.Outcome, fmt.Sprintf("%s logged %s", l.Instance, l.Outcome)
		}
	}
	for _, l := range lines {
		if l.Outcome == "claimed" && disturbed[l.Instance] {
			return true, "claimed by a killed or frozen worker",
				fmt.Sprintf("%s claimed it (lease %s) and was killed or frozen: its lease could run out before it sent", l.Instance, l.LeaseToken)
		}
	}
	return false, "outside", summarize(lines)
}

// classify says whether a duplicate is inside the window, and why.
func classify(lines []recordLine, disturbed map[string]bool, resets int) (inside bool, kind, reason string) {
	for _, l := range lines {
		if windowOutcomes[l.Outcome] {
			return true, "logged " + l.Outcome, fmt.Sprintf("%s logged %s", l.Instance, l.Outcome)
		}
	}
	for _, l := range lines {
		if l.Outcome != "claimed" || !disturbed[l.Instance] {
			continue
		}
		later := slices.ContainsFunc(lines, func(m recordLine) bool {
			return m.Instance == l.Instance && m.Seq > l.Seq && m.LeaseToken == l.LeaseToken
		})
		if !later {
			return true, "claimed by a killed or frozen worker",
				fmt.Sprintf("%s claimed it (lease %s) and was killed or frozen before its next line", l.Instance, l.LeaseToken)
		}
	}
	if resets > 0 {
		return true, "SES reset after acceptance", fmt.Sprintf("the SES proxy reset %d accepted SendEmail call(s) for it", resets)
	}
	return false, "outside", summarize(lines)
}

// summarize lists the outcomes logged for an event, e.g.
// "sent×2, store_error×1 (after SES accepted it)".
func summarize(lines []recordLine) string {
	if len(lines) == 0 {
		return "no worker line"
	}
	count := map[string]int{}
	sentButNotCommitted := false
	for _, l := range lines {
		count[l.Outcome]++
		if l.Outcome == "store_error" && l.SESID != "" {
			sentButNotCommitted = true
		}
	}
	var parts []string
	for _, o := range sortedKeys(count) {
		parts = append(parts, fmt.Sprintf("%s×%d", o, count[o]))
	}
	s := strings.Join(parts, ", ")
	if sentButNotCommitted {
		s += " (a store_error after SES accepted the email)"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	return keys
}
