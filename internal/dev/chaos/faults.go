package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobboard/jobboard/internal/dev/faultproxy"
	"github.com/jobboard/jobboard/internal/mail"
)

// faultKind names one kind of fault the harness injects.
type faultKind string

// The fault kinds. Every run injects each at least once.
const (
	faultWorkerKill       faultKind = "worker_kill"        // SIGKILL a worker, restart it
	faultWorkerFreeze     faultKind = "worker_freeze"      // SIGSTOP a worker for a moment, then SIGCONT
	faultWorkerFreezeLong faultKind = "worker_freeze_long" // ... for longer than the visibility timeout
	faultAPIKill          faultKind = "api_kill"           // SIGKILL an API process, restart it
	faultSweeperKill      faultKind = "sweeper_kill"       // SIGKILL the sweeper, restart it
	faultPGTerminate      faultKind = "pg_terminate"       // pg_terminate_backend of every worker session
	faultSQSUnavailable   faultKind = "sqs_unavailable"    // SQS answers 503 for a few seconds
	faultSQSRefuse        faultKind = "sqs_refuse"         // SQS connections are reset for a few seconds
	faultSESUnavailable   faultKind = "ses_unavailable"    // SES answers 503 for a few seconds
	faultSESRefuse        faultKind = "ses_refuse"         // SES connections are reset for a few seconds
	faultSESResetAfter    faultKind = "ses_reset_after"    // half the sends are accepted, their answer lost
	faultSESSlow          faultKind = "ses_slow"           // SES answers just before the send deadline
	faultSESTooSlow       faultKind = "ses_too_slow"       // SES answers after the send deadline
	faultSQSReorder       faultKind = "sqs_reorder"        // half the publishes held 1–3 s: later changes overtake them
)

var allFaultKinds = []faultKind{
	faultWorkerKill, faultWorkerFreeze, faultWorkerFreezeLong, faultAPIKill, faultSweeperKill,
	faultPGTerminate, faultSQSUnavailable, faultSQSRefuse, faultSESUnavailable, faultSESRefuse,
	faultSESResetAfter, faultSESSlow, faultSESTooSlow, faultSQSReorder,
}

// plannedFault is one entry of the schedule.
type plannedFault struct {
	At   time.Duration // after the start of the load
	Kind faultKind
	// For is how long the fault lasts: the outage, the freeze, the window
	// of resets or slowness, or how long a killed process stays down.
	For time.Duration
}

// plan returns the fault schedule of a run: every kind once, in a random
// order, then random kinds as long as they end before the load's planned
// end; gaps between FaultGapMin and FaultGapMax. The same seed gives the
// same schedule.
func plan(cfg Config, rng *rand.Rand) []plannedFault {
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	duration := func(k faultKind) time.Duration {
		switch k {
		case faultWorkerKill, faultAPIKill, faultSweeperKill:
			return between(200*time.Millisecond, 1500*time.Millisecond)
		case faultWorkerFreeze:
			return between(time.Second, 3*time.Second)
		case faultWorkerFreezeLong:
			return cfg.VisibilityTimeout + between(time.Second, 3*time.Second)
		case faultPGTerminate:
			return 3 * time.Second // the longest wait for a session inside a transaction
		case faultSQSReorder:
			return between(5*time.Second, 10*time.Second)
		}
		return between(1500*time.Millisecond, 4*time.Second)
	}
	kinds := append([]faultKind(nil), allFaultKinds...)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var out []plannedFault
	at := between(cfg.FaultGapMin, cfg.FaultGapMax) / 2
	for i := 0; ; i++ {
		k := allFaultKinds[rng.IntN(len(allFaultKinds))]
		if i < len(kinds) {
			k = kinds[i]
		}
		pf := plannedFault{At: at, Kind: k, For: duration(k)}
		// After every kind had its turn, a fault that would outlast the
		// load is not planned: the run would only wait for it.
		if i >= len(kinds) && pf.At+pf.For > cfg.LoadDuration {
			return out
		}
		out = append(out, pf)
		at += between(cfg.FaultGapMin, cfg.FaultGapMax)
	}
}

// sesRule decides the fault of each request to the SES stand-in: an
// outage applies to all of them; while resets are on, it picks half the
// SendEmail calls for ResetAfter and remembers their event ids.
type sesRule struct {
	outage  atomic.Int64 // a faultproxy.Fault
	resetOn atomic.Bool
	// sends counts the SendEmail calls, resetTotal those reset.
	sends, resetTotal atomic.Int64

	mu       sync.Mutex
	rng      *rand.Rand
	resetIDs map[string]int
}

func newSESRule(rng *rand.Rand) *sesRule {
	return &sesRule{rng: rng, resetIDs: map[string]int{}}
}

func (s *sesRule) decide(r *http.Request, body []byte) faultproxy.Fault {
	send := isSendEmail(r)
	if send {
		s.sends.Add(1)
	}
	if f := faultproxy.Fault(s.outage.Load()); f != faultproxy.Pass {
		return f
	}
	if !s.resetOn.Load() || !send {
		return faultproxy.Pass
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rng.IntN(2) == 0 {
		return faultproxy.Pass
	}
	s.resetIDs[sendEmailEventID(body)]++
	s.resetTotal.Add(1)
	return faultproxy.ResetAfter
}

// resets returns the event ids of the sends that were reset after the
// stand-in accepted them, with how many times.
func (s *sesRule) resets() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.resetIDs))
	for k, v := range s.resetIDs {
		out[k] = v
	}
	return out
}

// sqsRule decides the fault of each request to the SQS stand-in (an
// outage, or none), holds back publishing calls while reordering is on,
// and watches the publishing calls for event ids that must never be
// published.
type sqsRule struct {
	outage atomic.Int64 // a faultproxy.Fault
	// reorderOn holds half the publishing calls for 1–3 s before they go
	// on: an application's change published meanwhile (the walkers move
	// an application every half second or so) reaches the queue first,
	// and its worker sees the application's events newest first, in
	// batches of their own. held counts the calls held back.
	reorderOn atomic.Bool
	held      atomic.Int64
	// holdFor picks how long to hold a publishing call while reordering is
	// on (0: not at all); called under mu.
	holdFor func() time.Duration

	mu    sync.Mutex
	watch []string
	seen  map[string]int
}

func newSQSRule(rng *rand.Rand) *sqsRule {
	return &sqsRule{seen: map[string]int{}, holdFor: func() time.Duration {
		if rng.IntN(2) == 0 {
			return 0
		}
		return time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
	}}
}

func (s *sqsRule) decide(r *http.Request, body []byte) faultproxy.Fault {
	if !isPublish(r) {
		return faultproxy.Fault(s.outage.Load())
	}
	s.mu.Lock()
	for _, id := range s.watch {
		if bytes.Contains(body, []byte(id)) {
			s.seen[id]++
		}
	}
	var hold time.Duration
	if s.reorderOn.Load() {
		hold = s.holdFor()
	}
	s.mu.Unlock()
	if hold > 0 {
		// The proxy asks its rule before it forwards: sleeping here holds
		// this call back, and only this one.
		s.held.Add(1)
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
	}
	return faultproxy.Fault(s.outage.Load())
}

// watchFor adds event ids to look for in every publishing call.
func (s *sqsRule) watchFor(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watch = append(s.watch, ids...)
}

// published returns the watched ids that some publishing call carried.
func (s *sqsRule) published() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.seen)
}

// isPublish recognises SQS SendMessage and SendMessageBatch (JSON protocol).
func isPublish(r *http.Request) bool {
	t := r.Header.Get("X-Amz-Target")
	return t == "AmazonSQS.SendMessage" || t == "AmazonSQS.SendMessageBatch"
}

// isSendEmail recognises the SES v2 SendEmail call.
func isSendEmail(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.TrimSuffix(r.URL.Path, "/") == "/v2/email/outbound-emails"
}

// sendEmailEventID reads the event id of a SendEmail request: the
// X-Jobboard-Event-Id header, else the event_id tag.
func sendEmailEventID(body []byte) string {
	type pair struct{ Name, Value string }
	var in struct {
		Content struct {
			Simple struct{ Headers []pair }
		}
		EmailTags []pair
	}
	if json.Unmarshal(body, &in) != nil {
		return ""
	}
	for _, h := range in.Content.Simple.Headers {
		if strings.EqualFold(h.Name, mail.EventIDHeader) {
			return h.Value
		}
	}
	for _, t := range in.EmailTags {
		if t.Name == mail.TagEventID {
			return t.Value
		}
	}
	return ""
}

// injector applies the schedule to a running stack.
type injector struct {
	st    *stack
	cfg   Config
	start time.Time
	logf  func(format string, args ...any)
	rng   *rand.Rand // guarded by mu
	ses   *sesRule
	sqs   *sqsRule

	// One fault at a time per service: overlapping faults would hide
	// each other (a 503 answered late is neither an outage nor a slow send).
	sqsMu, sesMu sync.Mutex

	mu                  sync.Mutex
	counts              map[faultKind]int
	skipped             map[faultKind]int
	sendsHit            map[faultKind]int64 // SendEmail calls the SES faults met
	sessionsEnded, inTx int
	frozenBeyondTimeout int
}

func newInjector(st *stack, cfg Config, rng *rand.Rand, logf func(string, ...any)) *injector {
	in := &injector{
		st: st, cfg: cfg, logf: logf, rng: rng,
		ses:    newSESRule(rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))),
		sqs:    newSQSRule(rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))),
		counts: map[faultKind]int{}, skipped: map[faultKind]int{}, sendsHit: map[faultKind]int64{},
	}
	st.sesProxy.SetRule(in.ses.decide)
	st.sqsProxy.SetRule(in.sqs.decide)
	return in
}

// run injects the planned faults, each at its time, until the plan is done
// or ctx ends; then it waits for every fault to be over (processes
// restarted and thawed, proxies passing).
func (in *injector) run(ctx context.Context, faults []plannedFault) {
	in.start = time.Now()
	var wg sync.WaitGroup
	for _, pf := range faults {
		if err := pause(ctx, time.Until(in.start.Add(pf.At))); err != nil {
			break
		}
		wg.Go(func() { in.inject(ctx, pf) })
	}
	wg.Wait()
}

func (in *injector) choose(n int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rng.IntN(n)
}

func (in *injector) done(k faultKind, format string, args ...any) {
	in.mu.Lock()
	in.counts[k]++
	in.mu.Unlock()
	in.logf("t+%5.1fs  %-18s %s", time.Since(in.start).Seconds(), k, fmt.Sprintf(format, args...))
}

// target waits (a few seconds at most) for a running, unfrozen process of
// role r.
func (in *injector) target(ctx context.Context, r role) *slot {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s := in.st.fleet.pick(r, in.choose); s != nil {
			return s
		}
		if time.Now().After(deadline) || pause(ctx, 100*time.Millisecond) != nil {
			return nil
		}
	}
}

// inject applies one fault and undoes it after pf.For (sooner if ctx ends).
func (in *injector) inject(ctx context.Context, pf plannedFault) {
	st := in.st
	switch pf.Kind {
	case faultWorkerKill, faultAPIKill, faultSweeperKill:
		r := map[faultKind]role{faultWorkerKill: roleWorker, faultAPIKill: roleAPI, faultSweeperKill: roleSweeper}[pf.Kind]
		s := in.target(ctx, r)
		if s == nil {
			in.skip(pf.Kind)
			return
		}
		killed := st.fleet.kill(s)
		if killed == nil {
			in.skip(pf.Kind)
			return
		}
		in.done(pf.Kind, "%s killed, down %.1fs", killed.id, pf.For.Seconds())
		_ = pause(ctx, pf.For)
		if err := st.fleet.start(s); err != nil {
			in.logf("restart %s: %v", s.name, err)
		}
	case faultWorkerFreeze, faultWorkerFreezeLong:
		s := in.target(ctx, roleWorker)
		var frozen *instance
		if s != nil {
			frozen = st.fleet.freeze(s)
		}
		if frozen == nil {
			in.skip(pf.Kind)
			return
		}
		in.done(pf.Kind, "%s frozen %.1fs", frozen.id, pf.For.Seconds())
		if pf.For > in.cfg.VisibilityTimeout {
			in.mu.Lock()
			in.frozenBeyondTimeout++
			in.mu.Unlock()
		}
		_ = pause(ctx, pf.For)
		st.fleet.thaw(frozen)
	case faultPGTerminate:
		// Wait (up to pf.For) for a worker to be inside a transaction, the
		// moment that matters, then end every worker session.
		var ended, inTx int
		var err error
		for deadline := time.Now().Add(pf.For); err == nil && ended == 0 && time.Now().Before(deadline); {
			ended, inTx, err = st.db.terminateWorkers(ctx, true)
			if ended == 0 && pause(ctx, 10*time.Millisecond) != nil {
				break
			}
		}
		if err == nil && ended == 0 {
			ended, inTx, err = st.db.terminateWorkers(context.WithoutCancel(ctx), false)
		}
		if err != nil {
			in.logf("pg_terminate: %v", err)
			in.skip(pf.Kind)
			return
		}
		in.mu.Lock()
		in.sessionsEnded += ended
		in.inTx += inTx
		in.mu.Unlock()
		in.done(pf.Kind, "%d worker sessions ended, %d inside a transaction", ended, inTx)
	case faultSQSUnavailable, faultSQSRefuse:
		f := faultproxy.Unavailable
		if pf.Kind == faultSQSRefuse {
			f = faultproxy.Refuse
		}
		in.sqsMu.Lock()
		defer in.sqsMu.Unlock()
		in.sqs.outage.Store(int64(f))
		in.done(pf.Kind, "%.1fs", pf.For.Seconds())
		_ = pause(ctx, pf.For)
		in.sqs.outage.Store(int64(faultproxy.Pass))
	case faultSQSReorder:
		before := in.sqs.held.Load()
		in.sqs.reorderOn.Store(true)
		in.done(pf.Kind, "%.1fs, half the publishes held 1–3 s", pf.For.Seconds())
		_ = pause(ctx, pf.For)
		in.sqs.reorderOn.Store(false)
		n := in.sqs.held.Load() - before
		in.mu.Lock()
		in.sendsHit[pf.Kind] += n
		in.mu.Unlock()
		in.logf("t+%5.1fs  %-18s over: %d publishes held", time.Since(in.start).Seconds(), pf.Kind, n)
	case faultSESUnavailable, faultSESRefuse, faultSESResetAfter, faultSESSlow, faultSESTooSlow:
		in.sesMu.Lock()
		defer in.sesMu.Unlock()
		hits := in.ses.sends.Load
		if pf.Kind == faultSESResetAfter {
			hits = in.ses.resetTotal.Load
		}
		before := hits()
		undo := in.sesFault(pf)
		_ = pause(ctx, pf.For)
		// A window that no send went through proves nothing (the workers
		// may all have been down, or SQS out): keep it open until one does.
		for until := time.Now().Add(maxExtension); hits() == before && time.Now().Before(until); {
			if pause(ctx, 50*time.Millisecond) != nil {
				break
			}
		}
		undo()
		n := hits() - before
		in.mu.Lock()
		in.sendsHit[pf.Kind] += n
		in.mu.Unlock()
		in.logf("t+%5.1fs  %-18s over: %d sends hit", time.Since(in.start).Seconds(), pf.Kind, n)
	}
}

// maxExtension bounds how long an SES fault stays on past its planned end
// while waiting for a send to hit.
const maxExtension = 8 * time.Second

// sesFault switches on an SES fault and returns what switches it off.
func (in *injector) sesFault(pf plannedFault) (undo func()) {
	switch pf.Kind {
	case faultSESUnavailable, faultSESRefuse:
		f := faultproxy.Unavailable
		if pf.Kind == faultSESRefuse {
			f = faultproxy.Refuse
		}
		in.ses.outage.Store(int64(f))
		in.done(pf.Kind, "%.1fs", pf.For.Seconds())
		return func() { in.ses.outage.Store(int64(faultproxy.Pass)) }
	case faultSESResetAfter:
		in.ses.resetOn.Store(true)
		in.done(pf.Kind, "%.1fs, half the sends", pf.For.Seconds())
		return func() { in.ses.resetOn.Store(false) }
	default:
		// The send deadline counts from the start of the invocation: a
		// first record's send ends just before it (slow) or after it.
		d := in.cfg.sendDeadline() - 700*time.Millisecond
		if pf.Kind == faultSESTooSlow {
			d = in.cfg.sendDeadline() + 1500*time.Millisecond
		}
		in.st.sesProxy.SetDelay(d)
		in.done(pf.Kind, "delay %.1fs for %.1fs (send deadline %.1fs)", d.Seconds(), pf.For.Seconds(), in.cfg.sendDeadline().Seconds())
		return func() { in.st.sesProxy.SetDelay(0) }
	}
}

func (in *injector) skip(k faultKind) {
	in.mu.Lock()
	in.skipped[k]++
	in.mu.Unlock()
	in.logf("t+%5.1fs  %-18s skipped: no target", time.Since(in.start).Seconds(), k)
}
