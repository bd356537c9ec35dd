package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is what a run did and found. Failures lists every broken promise;
// a run passes when it is empty.
type Report struct {
	Name     string
	Seed     int64
	Duration time.Duration
	LogDir   string
	// Database is the run's own database, dropped at the end.
	Database string

	// The load, as the generator saw it.
	Applications int
	Requests     int64
	Confirmed    int64
	Uncertain    int64
	ReadBacks    int64
	Conflicts    int64

	// The ground truth, after the system settled.
	EventsCommitted int
	Emails          int
	Unattributed    int
	Lost            []string
	Parked          []string
	Inside          []duplicate
	Outside         []duplicate
	Phantom         []string
	// Superseded: older statuses never emailed because a newer one of the
	// application was (the worker logged superseded).
	Superseded []string
	// OrderInside and OrderOutside: emails that reached a candidate after
	// a newer status's email, inside and outside the window; StaleLast:
	// applications whose last email is not their latest status.
	OrderInside  []duplicate
	OrderOutside []duplicate
	StaleLast    []int64

	// The delivery feedback: events not emailed because their address was
	// suppressed, the suppressed addresses (of SimulatorAddresses), the SES
	// events applied, and the status emails accepted for an address in the
	// second of its suppression or later, inside and outside the window.
	Suppressed          int
	SuppressedAddresses int
	SimulatorAddresses  int
	FeedbackApplied     int
	LateInside          []lateEmail
	LateOutside         []lateEmail

	// The dead-letter queue and its redrive.
	PoisonSent         int
	DeadLetteredSent   int
	DLQBefore          int
	DLQPoisonBefore    int
	DLQEventsBefore    int
	Redriven           int
	RedriveMethod      string
	RedriveSecondEmail []string
	DLQAfter           int

	Retention *Probe

	Faults        map[faultKind]int
	Skipped       map[faultKind]int
	SendsHit      map[faultKind]int64 // SendEmail calls met by each SES fault kind
	SessionsEnded int
	SessionsInTx  int
	LongFreezes   int
	SESResets     int
	Started       map[role]int
	Killed        map[role]int
	Crashed       []string
	Settles       []Settle

	Failures []string
}

// Passed reports whether the run kept every promise.
func (r *Report) Passed() bool { return len(r.Failures) == 0 }

// judgeFailures fills Failures from the rest of the report.
func (r *Report) judgeFailures(cfg Config) {
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	if n := len(r.Lost); n > 0 {
		fail("%d committed events were never emailed and are not in the DLQ (first: %s)", n, r.Lost[0])
	}
	if n := len(r.Outside); n > 0 {
		fail("%d events were emailed more than once outside the documented window (first: %s, %s)", n, r.Outside[0].EventID, r.Outside[0].Reason)
	}
	if n := len(r.OrderOutside); n > 0 {
		fail("%d emails reached a candidate after a newer status's, outside the documented window (first: %s, %s)",
			n, r.OrderOutside[0].EventID, r.OrderOutside[0].Reason)
	}
	if n := len(r.StaleLast); n > 0 {
		fail("%d applications' last email is not their latest status (first: application %d)", n, r.StaleLast[0])
	}
	if n := len(r.Phantom); n > 0 {
		fail("%d emails name an event that never committed (first: %s)", n, r.Phantom[0])
	}
	if n := len(r.LateOutside); n > 0 {
		fail("%d status emails went to an address after its suppression, outside the window (first: %s, %s)", n, r.LateOutside[0].EventID, r.LateOutside[0].Reason)
	}
	if r.SuppressedAddresses < r.SimulatorAddresses {
		fail("%d of %d bounce and complaint addresses were suppressed", r.SuppressedAddresses, r.SimulatorAddresses)
	}
	if r.SimulatorAddresses > 0 && r.Suppressed == 0 {
		fail("no status email was suppressed: the feedback loop did nothing")
	}
	if r.Unattributed > 0 {
		fail("%d emails carry no event id header", r.Unattributed)
	}
	if r.EventsCommitted < cfg.Changes/2 {
		fail("only %d status changes committed, want at least %d: the load did not get through", r.EventsCommitted, cfg.Changes/2)
	}
	if r.DLQPoisonBefore < r.PoisonSent {
		fail("%d of %d poison messages reached the DLQ", r.DLQPoisonBefore, r.PoisonSent)
	}
	if n := len(r.RedriveSecondEmail); n > 0 {
		fail("the redrive emailed %d events a second time (first: %s)", n, r.RedriveSecondEmail[0])
	}
	if p := r.Retention; p != nil {
		if n := len(p.SecondEmails); n > 0 {
			fail("retention probe: %d of %d aged events were emailed again", n, len(p.Aged))
		}
		if p.Expired < len(p.Aged) {
			fail("retention probe: a worker logged outcome expired for %d of %d aged copies", p.Expired, len(p.Aged))
		}
		if p.SweepsAfter < 2 {
			fail("retention probe: the sweeper logged %d sweeps after the stale rows were inserted, want 2 (is its \"sweep done\" line still there?)", p.SweepsAfter)
		}
		if n := len(p.StalePublished); n > 0 {
			fail("retention probe: %d of %d outbox rows older than the retention were published to SQS", n, len(p.Stale))
		}
		if n := len(p.StaleEmailed); n > 0 {
			fail("retention probe: %d of %d outbox rows older than the retention were emailed", n, len(p.Stale))
		}
	} else {
		fail("the retention probe did not run")
	}
	for _, s := range r.Settles {
		if !s.Settled {
			fail("the stack did not settle %s within %v (%s)", s.After, cfg.SettleTimeout, s.Last)
		}
	}
	for _, k := range allFaultKinds {
		if r.Faults[k] == 0 {
			fail("fault %s was never injected", k)
		}
		if n, ok := r.SendsHit[k]; ok && n == 0 {
			fail("fault %s never met a send", k)
		}
	}
	if r.LongFreezes == 0 {
		fail("no worker was frozen for longer than the visibility timeout")
	}
	for _, c := range r.Crashed {
		fail("a process exited on its own: %s", c)
	}
}

// Print writes the report for people.
func (r *Report) Print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("chaos report (%s): seed %d, %s, database %s (dropped)", r.Name, r.Seed, r.Duration.Round(time.Second), r.Database)
	p("  load:        %d applications; %d PATCH requests: %d confirmed, %d uncertain (read back %d), %d conflicts",
		r.Applications, r.Requests, r.Confirmed, r.Uncertain, r.ReadBacks, r.Conflicts)
	p("  committed:   %d status changes (history rows)", r.EventsCommitted)
	p("  emails:      %d (%d without an event id)", r.Emails, r.Unattributed)
	p("  lost:        %d%s", len(r.Lost), firstFew(r.Lost))
	p("  parked:      %d committed events in the DLQ, not emailed%s", len(r.Parked), firstFew(r.Parked))
	p("  duplicates:  %d inside the window, %d outside", len(r.Inside), len(r.Outside))
	p("  feedback:    %d SES events applied; %d of %d bounce and complaint addresses suppressed; %d status emails suppressed; %d emails after a suppression inside the window, %d outside",
		r.FeedbackApplied, r.SuppressedAddresses, r.SimulatorAddresses, r.Suppressed, len(r.LateInside), len(r.LateOutside))
	for i, l := range r.LateOutside {
		if i == 20 {
			break
		}
		p("    late    %s to %s: %s", l.EventID, l.To, l.Reason)
	}
	for _, k := range kinds(r.Inside) {
		p("    inside  %4d × %s", k.n, k.kind)
	}
	for i, d := range r.Outside {
		if i == 20 {
			p("    … %d more outside", len(r.Outside)-20)
			break
		}
		p("    outside %s: %d emails; %s", d.EventID, d.Emails, d.Reason)
	}
	p("  order:       %d older statuses superseded (not emailed: a newer one was); %d emails after a newer status's, %d inside the window, %d outside; %d applications whose last email is not their latest",
		len(r.Superseded), len(r.OrderInside)+len(r.OrderOutside), len(r.OrderInside), len(r.OrderOutside), len(r.StaleLast))
	for _, k := range kinds(r.OrderInside) {
		p("    inside  %4d × %s", k.n, k.kind)
	}
	for i, d := range r.OrderOutside {
		if i == 20 {
			p("    … %d more outside", len(r.OrderOutside)-20)
			break
		}
		p("    outside %s: %s", d.EventID, d.Reason)
	}
	if len(r.Phantom) > 0 {
		p("  phantom:     %d emails for events that never committed%s", len(r.Phantom), firstFew(r.Phantom))
	}
	p("  DLQ:         %d before the redrive (%d poison of %d sent, %d events, of which %d copies of emailed events put there); redrive by %s moved %d; %d after; %d second emails from the redrive",
		r.DLQBefore, r.DLQPoisonBefore, r.PoisonSent, r.DLQEventsBefore, r.DeadLetteredSent, r.RedriveMethod, r.Redriven, r.DLQAfter, len(r.RedriveSecondEmail))
	if q := r.Retention; q != nil {
		p("  retention:   %d aged events (claims deleted by the sweeper: %v), %d copies delivered: %d logged expired, %d emailed again",
			len(q.Aged), q.ClaimsDeleted, q.CopiesSent, q.Expired, len(q.SecondEmails))
		p("               %d stale unpublished rows over %d sweeps: %d published to SQS, %d emailed (%d marked published in the outbox)",
			len(q.Stale), q.SweepsAfter, len(q.StalePublished), len(q.StaleEmailed), q.StaleMarked)
	}
	var faults []string
	for _, k := range allFaultKinds {
		s := fmt.Sprintf("%s %d", k, r.Faults[k])
		if n, ok := r.SendsHit[k]; ok && k == faultSQSReorder {
			s += fmt.Sprintf(" (%d publishes held)", n)
		} else if ok {
			s += fmt.Sprintf(" (%d sends hit)", n)
		}
		if r.Skipped[k] > 0 {
			s += fmt.Sprintf(" (%d skipped)", r.Skipped[k])
		}
		faults = append(faults, s)
	}
	p("  faults:      %s", strings.Join(faults, ", "))
	p("               %d worker sessions terminated (%d inside a transaction); %d freezes beyond the visibility timeout; %d SES sends reset after acceptance",
		r.SessionsEnded, r.SessionsInTx, r.LongFreezes, r.SESResets)
	p("  processes:   started api %d, worker %d, sweeper %d; killed api %d, worker %d, sweeper %d; crashed %d",
		r.Started[roleAPI], r.Started[roleWorker], r.Started[roleSweeper], r.Killed[roleAPI], r.Killed[roleWorker], r.Killed[roleSweeper], len(r.Crashed))
	for _, s := range r.Settles {
		state := "settled"
		if !s.Settled {
			state = "DID NOT SETTLE"
		}
		p("  settle:      %s: %s in %s (%s)", s.After, state, s.Took.Round(100*time.Millisecond), s.Last)
	}
	if r.LogDir != "" {
		p("  logs:        %s", r.LogDir)
	}
	if r.Passed() {
		p("PASS")
		return
	}
	p("FAIL")
	for _, f := range r.Failures {
		p("  - %s", f)
	}
}

func firstFew(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	if len(ids) > 5 {
		return " (" + strings.Join(ids[:5], ", ") + ", …)"
	}
	return " (" + strings.Join(ids, ", ") + ")"
}

type kindCount struct {
	kind string
	n    int
}

// kinds counts the duplicates by kind, most frequent first.
func kinds(ds []duplicate) []kindCount {
	count := map[string]int{}
	for _, d := range ds {
		count[d.Kind]++
	}
	var out []kindCount
	for k, n := range count {
		out = append(out, kindCount{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].kind < out[j].kind
	})
	return out
}
