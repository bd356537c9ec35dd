package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jobboard/jobboard/internal/dev/faultproxy"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/syncio"
)

// Run performs one chaos run and returns its report; the run passed when
// the report's Failures is empty. Everything it starts is stopped and its
// database dropped before it returns, also when ctx is cancelled (Ctrl-C)
// or a phase fails. Errors: the run could not be carried out (invalid
// configuration, a stand-in or binary that would not start, the seeding
// failed, ctx ended); the report then holds what was done so far.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep = &Report{Name: cfg.Name, Seed: cfg.Seed, Faults: map[faultKind]int{}, Skipped: map[faultKind]int{}}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	out = syncio.NewWriter(out)
	logf := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6a6f62626f617264))
	logf("chaos (%s): seed %d", cfg.Name, cfg.Seed)

	logDir, keepLogs := cfg.LogDir, true
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "jobboard-chaos-logs-"); err != nil {
			return rep, err
		}
		keepLogs = false
	}
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		return rep, err
	}
	rep.LogDir = logDir
	defer func() {
		// Logs of a failed run stay for the post-mortem.
		if !keepLogs && err == nil && rep.Passed() {
			_ = os.RemoveAll(logDir)
			rep.LogDir = ""
		}
	}()

	// Build the functions while the services start.
	binDir := cfg.BinDir
	built := make(chan error, 1)
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "jobboard-chaos-bin-"); err != nil {
			return rep, err
		}
		defer os.RemoveAll(binDir)
		go func() {
			began := time.Now()
			err := buildBinaries(ctx, binDir)
			if err == nil {
				logf("built the functions in %s", time.Since(began).Round(100*time.Millisecond))
			}
			built <- err
		}()
	} else {
		built <- nil
	}

	st := &stack{}
	defer func() {
		if cerr := st.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
		if st.fleet != nil {
			rep.Crashed = st.fleet.crashed()
			rep.Started, rep.Killed = st.fleet.counts()
		}
		rep.Duration = time.Since(start)
		if err != nil {
			rep.Failures = append(rep.Failures, "the run did not complete: "+err.Error())
		}
	}()
	if keepLogs {
		logf("starting the stack (logs in %s)", logDir)
	} else {
		logf("starting the stack (logs in %s, removed if the run passes)", logDir)
	}
	serr := startServices(ctx, cfg, st)
	rep.Database = st.dbName
	if berr := <-built; berr != nil || serr != nil {
		return rep, errors.Join(berr, serr)
	}
	if err := startProcesses(ctx, cfg, binDir, logDir, st); err != nil {
		return rep, fmt.Errorf("start the stack: %w", err)
	}
	logf("stack up after %s", time.Since(start).Round(100*time.Millisecond))
	r := &run{cfg: cfg, st: st, rep: rep, rng: rng, logf: logf}
	if err := r.phases(ctx); err != nil {
		return rep, err
	}
	rep.judgeFailures(cfg)
	return rep, nil
}

// run is the state shared by the phases of one Run.
type run struct {
	cfg  Config
	st   *stack
	rep  *Report
	rng  *rand.Rand
	logf func(string, ...any)
	inj  *injector
}

func (r *run) phases(ctx context.Context) error {
	cfg, st, rep := r.cfg, r.st, r.rep
	a := newAPI(st.apiURLs, 10*time.Second, rand.New(rand.NewPCG(r.rng.Uint64(), 1)))
	phase := time.Now()
	apps, err := seedData(ctx, a, cfg)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := st.db.verifyAccounts(ctx); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	rep.Applications = len(apps)
	r.logf("seeded %d applications in %s", len(apps), time.Since(phase).Round(100*time.Millisecond))

	// Load and faults, together.
	poison, err := sendPoison(ctx, st, cfg.Poison)
	rep.PoisonSent = len(poison)
	if err != nil {
		return err
	}
	schedule := plan(cfg, r.rng)
	r.inj = newInjector(st, cfg, rand.New(rand.NewPCG(r.rng.Uint64(), 2)), r.logf)
	r.logf("load: %d changes over %s with %d faults planned", cfg.Changes, cfg.LoadDuration, len(schedule))
	phase = time.Now()
	var stats loadStats
	var wg sync.WaitGroup
	wg.Go(func() { r.inj.run(ctx, schedule) })
	walk(ctx, a, cfg, apps, r.rng.Uint64(), &stats)
	wg.Wait()
	rep.Requests, rep.Confirmed, rep.Uncertain = stats.Requests.Load(), stats.Confirmed.Load(), stats.Uncertain.Load()
	rep.ReadBacks, rep.Conflicts = stats.ReadBacks.Load(), stats.Refused.Load()
	r.collectFaults()
	r.logf("load done in %s: %d requests, %d confirmed, %d uncertain", time.Since(phase).Round(100*time.Millisecond),
		rep.Requests, rep.Confirmed, rep.Uncertain)
	if err := ctx.Err(); err != nil {
		return err
	}

	// Settle with everything whole again.
	if err := st.fleet.restoreAll(); err != nil {
		return err
	}
	r.inj.sqs.outage.Store(int64(faultproxy.Pass))
	r.inj.ses.outage.Store(int64(faultproxy.Pass))
	r.inj.ses.resetOn.Store(false)
	st.sesProxy.SetDelay(0)
	if err := r.settle(ctx, "after the load"); err != nil {
		return err
	}
	afterLoad, _, err := emailCounts(ctx, st)
	if err != nil {
		return err
	}

	// The DLQ, and its redrive: with copies of emailed events in it too.
	if rep.DeadLetteredSent, err = deadLetter(ctx, st, r.rng, afterLoad); err != nil {
		return err
	}
	dlq, err := readDLQ(ctx, st)
	if err != nil {
		return err
	}
	committed, err := st.db.committed(ctx)
	if err != nil {
		return err
	}
	rep.DLQBefore = len(dlq)
	for _, m := range dlq {
		if _, ok := committed[m.eventID()]; ok {
			rep.DLQEventsBefore++
		} else {
			rep.DLQPoisonBefore++
		}
	}
	rep.RedriveMethod = "receive/send/delete"
	if rep.Redriven, err = redrive(ctx, st, dlq); err != nil {
		return err
	}
	r.logf("redrove %d messages from the DLQ (%d poison)", rep.Redriven, rep.DLQPoisonBefore)
	if err := r.settle(ctx, "after the redrive"); err != nil {
		return err
	}
	afterRedrive, unattributed, err := emailCounts(ctx, st)
	if err != nil {
		return err
	}
	for _, id := range sortedKeys(afterRedrive) {
		if afterLoad[id] > 0 && afterRedrive[id] > afterLoad[id] {
			rep.RedriveSecondEmail = append(rep.RedriveSecondEmail, id)
		}
	}
	finalDLQ, err := readDLQ(ctx, st)
	if err != nil {
		return err
	}
	rep.DLQAfter = len(finalDLQ)
	inDLQ := map[string]bool{}
	for _, m := range finalDLQ {
		if id := m.eventID(); id != "" {
			inDLQ[id] = true
		}
	}

	// The verdict on the main run, before the probe changes anything.
	if committed, err = st.db.committed(ctx); err != nil {
		return err
	}
	lines, err := readRecordLines(st.fleet.instancesOf(roleWorker))
	if err != nil {
		return err
	}
	fb, err := st.db.feedback(ctx)
	if err != nil {
		return err
	}
	versions, err := st.db.versions(ctx)
	if err != nil {
		return err
	}
	sequence, err := emailSequence(ctx, st)
	if err != nil {
		return err
	}
	v := judge(evidence{
		Committed: committed, Refused: map[string]bool{}, Emails: afterRedrive, DLQ: inDLQ,
		Lines: lines, Disturbed: st.fleet.disturbedIDs(), Resets: r.inj.ses.resets(), Suppressed: fb.Suppressed,
		Versions: versions, Sequence: sequence,
	})
	allEmails, err := localaws.Emails(ctx, st.sesServer.Endpoint)
	if err != nil {
		return err
	}
	late := lateEmails(allEmails, committed, fb, lines)
	for _, l := range late {
		if l.Inside {
			rep.LateInside = append(rep.LateInside, l)
		} else {
			rep.LateOutside = append(rep.LateOutside, l)
		}
	}
	rep.Suppressed, rep.SuppressedAddresses, rep.FeedbackApplied = len(v.Suppressed), len(fb.Suppressions), fb.Applied
	for i := range cfg.Candidates {
		if localaws.Simulated(cfg.candidateEmail(i)) != localaws.SimulateDelivery {
			rep.SimulatorAddresses++
		}
	}
	rep.EventsCommitted, rep.Unattributed = len(committed), unattributed
	for _, n := range afterRedrive {
		rep.Emails += n
	}
	rep.Emails += unattributed
	rep.Lost, rep.Parked, rep.Phantom = v.Lost, v.Parked, v.Phantom
	rep.Superseded, rep.StaleLast = v.Superseded, v.StaleLast
	for _, d := range v.OutOfOrder {
		if d.Inside {
			rep.OrderInside = append(rep.OrderInside, d)
		} else {
			rep.OrderOutside = append(rep.OrderOutside, d)
		}
	}
	for _, d := range v.Duplicates {
		if d.Inside {
			rep.Inside = append(rep.Inside, d)
		} else {
			rep.Outside = append(rep.Outside, d)
		}
	}
	if err := writeJSON(filepath.Join(rep.LogDir, "verdict.json"), map[string]any{
		"emails_after_load": afterLoad, "emails_after_redrive": afterRedrive, "duplicates": v.Duplicates,
		"lost": v.Lost, "parked": v.Parked, "ses_resets": r.inj.ses.resets(),
		"suppressed": v.Suppressed, "late_emails": late,
		"superseded": v.Superseded, "out_of_order": v.OutOfOrder, "stale_last": v.StaleLast,
	}); err != nil {
		return err
	}
	r.logf("verdict: %d committed, %d emails, %d lost, %d duplicates inside the window, %d outside, %d superseded, %d out of order (%d outside the window); %d suppressed, %d feedback records applied",
		rep.EventsCommitted, rep.Emails, len(rep.Lost), len(rep.Inside), len(rep.Outside), len(rep.Superseded),
		len(v.OutOfOrder), len(rep.OrderOutside), rep.Suppressed, rep.FeedbackApplied)
	if q := r.st.sesQuota; q != nil {
		st := q.Stats(time.Time{})
		r.logf("SES quota %g/s: %d sends asked for, %d throttled (429), at most %d within a second",
			r.cfg.SendRate, st.Calls, st.Throttled, st.MaxCallsPerSecond)
	}

	// The retention probe.
	probe, err := probeRetention(ctx, st, r.rng, afterRedrive, committed, r.inj.sqs.watchFor)
	rep.Retention = probe
	if err != nil {
		return err
	}
	sentAt := time.Now().Add(-time.Second)
	r.logf("retention probe: aged %d events, inserted %d stale rows, delivered %d copies", len(probe.Aged), len(probe.Stale), probe.CopiesSent)
	// Two sweeps ending after the copies were sent: the first may have
	// begun before the stale rows existed, the second began after it ended.
	if probe.SweepsAfter, err = waitForSweeps(ctx, st, sentAt, 2, cfg.SettleTimeout); err != nil {
		return err
	}
	if err := r.settle(ctx, "after the retention probe"); err != nil {
		return err
	}
	afterProbe, _, err := emailCounts(ctx, st)
	if err != nil {
		return err
	}
	if lines, err = readRecordLines(st.fleet.instancesOf(roleWorker)); err != nil {
		return err
	}
	return finishProbe(ctx, st, probe, afterRedrive, afterProbe, lines, sentAt, r.inj.sqs.published())
}

func (r *run) settle(ctx context.Context, after string) error {
	s, err := settle(ctx, r.st, after)
	r.rep.Settles = append(r.rep.Settles, s)
	state := "settled"
	if !s.Settled {
		state = "did not settle"
	}
	r.logf("%s %s in %s (%s)", state, after, s.Took.Round(100*time.Millisecond), s.Last)
	return err
}

// writeJSON writes v to path, for the post-mortem of a run.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// collectFaults copies the injector's counts into the report.
func (r *run) collectFaults() {
	in := r.inj
	in.mu.Lock()
	defer in.mu.Unlock()
	for k, n := range in.counts {
		r.rep.Faults[k] = n
	}
	for k, n := range in.skipped {
		r.rep.Skipped[k] = n
	}
	r.rep.SendsHit = map[faultKind]int64{}
	for k, n := range in.sendsHit {
		r.rep.SendsHit[k] = n
	}
	r.rep.SessionsEnded, r.rep.SessionsInTx, r.rep.LongFreezes = in.sessionsEnded, in.inTx, in.frozenBeyondTimeout
	for _, n := range in.ses.resets() {
		r.rep.SESResets += n
	}
}
