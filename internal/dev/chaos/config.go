package chaos

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jobboard/jobboard/internal/dev/localaws"
)

// Config is one chaos run. Short and Full return the two standard ones;
// ServerURL, Seed and Out are the caller's.
type Config struct {
	// Name labels the run in the report ("short", "full").
	Name string
	// ServerURL names the PostgreSQL server; the run creates its own
	// database there and drops it at the end.
	ServerURL string
	// Seed drives every random choice of the harness (the fault schedule,
	// the load's choices). The report prints it; the same seed gives the
	// same schedule.
	Seed int64
	// BinDir holds prebuilt api, worker, sweeper and webhook binaries; empty means
	// build them with `go build` into a temporary folder.
	BinDir string
	// LogDir receives one log file per process instance; empty means a
	// temporary folder, removed at the end unless the run failed.
	LogDir string
	// Out receives progress lines and the report. Nil discards them.
	Out io.Writer

	// APIs and Workers are how many of each run at once (one sweeper).
	APIs    int
	Workers int

	// Employers, JobsPerEmployer and Candidates shape the seeded data:
	// every candidate applies to every job.
	Employers       int
	JobsPerEmployer int
	Candidates      int
	// Changes is how many status changes the load aims for, spread over
	// LoadDuration by Walkers concurrent walkers; the load stops at the
	// target or at 1.5 × LoadDuration, whichever comes first.
	Changes      int
	LoadDuration time.Duration
	Walkers      int
	// Poison is how many malformed messages are put on the queue: they
	// must end in the dead-letter queue.
	Poison int

	// DeadLettered is how many copies of already emailed events are put in
	// the dead-letter queue before its redrive, as when one copy of an
	// event was emailed and another ran out of receives.
	DeadLettered int
	// VisibilityTimeout and MaxReceiveCount configure the queue.
	VisibilityTimeout time.Duration
	MaxReceiveCount   int
	// InvocationTimeout is the worker's local invocation deadline
	// (LOCAL_INVOCATION_TIMEOUT); the email send must end 2 s before it.
	InvocationTimeout time.Duration
	// SweepInterval and SweepGrace configure the sweeper.
	SweepInterval time.Duration
	SweepGrace    time.Duration

	// FaultGapMin and FaultGapMax bound the pause between two faults.
	FaultGapMin, FaultGapMax time.Duration
	// SettleTimeout bounds each wait for the system to settle.
	SettleTimeout time.Duration

	// ProbeEvents is how many emailed events the retention probe ages and
	// delivers again; ProbeStale how many aged never-published outbox rows
	// it inserts.
	ProbeEvents int
	ProbeStale  int

	// FeedbackEvery puts SES's mailbox simulator behind some candidates:
	// of every FeedbackEvery candidates, one has an address that bounces
	// for good and one an address whose owner complains (see
	// feedbackAddress). Zero: none.
	FeedbackEvery int

	// SendRate, when positive, puts SES's sending quota in front of the
	// SES stand-in (internal/dev/quota): that many sends a second, a
	// bucket of half a second's, 429 above it, and GetAccount telling the
	// rate, which the workers pace their sends at. Zero: no quota.
	SendRate float64
}

// Short is the configuration `go test` runs: every fault kind once or
// twice, a few hundred status changes, about a minute.
func Short() Config {
	return Config{
		Name:              "short",
		APIs:              2,
		Workers:           3,
		Employers:         2,
		JobsPerEmployer:   5,
		Candidates:        12,
		Changes:           300,
		LoadDuration:      22 * time.Second,
		Walkers:           6,
		Poison:            2,
		DeadLettered:      5,
		VisibilityTimeout: 6 * time.Second,
		MaxReceiveCount:   maxReceiveCount,
		InvocationTimeout: 6 * time.Second,
		SweepInterval:     time.Second,
		SweepGrace:        2 * time.Second,
		FaultGapMin:       1000 * time.Millisecond,
		FaultGapMax:       1700 * time.Millisecond,
		SettleTimeout:     40 * time.Second,
		ProbeEvents:       5,
		ProbeStale:        3,
		FeedbackEvery:     6,
	}
}

// Full is the configuration of `make chaos`: several thousand status
// changes under a few dozen faults (docs/development.md has the time a run
// takes).
func Full() Config {
	return Config{
		Name:              "full",
		APIs:              2,
		Workers:           4,
		Employers:         5,
		JobsPerEmployer:   10,
		Candidates:        30,
		Changes:           4000,
		LoadDuration:      210 * time.Second,
		Walkers:           10,
		Poison:            5,
		DeadLettered:      20,
		VisibilityTimeout: 10 * time.Second,
		MaxReceiveCount:   maxReceiveCount,
		InvocationTimeout: 8 * time.Second,
		SweepInterval:     2 * time.Second,
		SweepGrace:        3 * time.Second,
		FaultGapMin:       3 * time.Second,
		FaultGapMax:       6 * time.Second,
		SettleTimeout:     90 * time.Second,
		ProbeEvents:       20,
		ProbeStale:        10,
		FeedbackEvery:     10,
	}
}

// maxReceiveCount is the queue's, as template.yaml sets it (a test checks):
// the worker's backoffs are tuned to it, and a smaller one would send events
// that faults merely delayed to the DLQ.
const maxReceiveCount = 10

// sendMargin is the worker's default: the send gives up this long before
// the invocation deadline (worker.DefaultSendMargin).
const sendMargin = 2 * time.Second

// sendDeadline is how long after an invocation starts its first send must
// end.
func (c Config) sendDeadline() time.Duration { return c.InvocationTimeout - sendMargin }

func (c Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.ServerURL != "", "ServerURL is required")
	check(c.APIs >= 1 && c.Workers >= 1, "need at least one API and one worker")
	check(c.Employers >= 1 && c.JobsPerEmployer >= 1 && c.Candidates >= 1, "need employers, jobs and candidates")
	check(c.Changes >= 1 && c.Walkers >= 1 && c.LoadDuration > 0, "need changes, walkers and a load duration")
	check(c.Employers*c.JobsPerEmployer*c.Candidates*4 >= c.Changes,
		"%d applications cannot carry %d changes (at most 4 each)", c.Employers*c.JobsPerEmployer*c.Candidates, c.Changes)
	check(c.MaxReceiveCount >= 1, "MaxReceiveCount must be at least 1")
	check(c.InvocationTimeout > 5*time.Second,
		"InvocationTimeout %v leaves the worker no time: it starts no record within 5 s of its deadline", c.InvocationTimeout)
	check(c.VisibilityTimeout >= c.InvocationTimeout && c.VisibilityTimeout%time.Second == 0,
		"VisibilityTimeout must be whole seconds and at least InvocationTimeout (as Lambda requires)")
	check(c.SweepInterval > 0 && c.SweepGrace > 0, "SweepInterval and SweepGrace must be positive")
	check(c.FaultGapMin > 0 && c.FaultGapMax >= c.FaultGapMin, "need 0 < FaultGapMin ≤ FaultGapMax")
	check(c.SettleTimeout > 0, "SettleTimeout must be positive")
	check(c.ProbeEvents >= 1 && c.ProbeStale >= 1, "the retention probe needs events")
	check(c.FeedbackEvery == 0 || c.FeedbackEvery >= 3, "FeedbackEvery must be 0 (none) or at least 3")
	check(c.SendRate >= 0, "SendRate must be 0 (no quota) or positive")
	return errors.Join(errs...)
}

// candidateEmail is candidate c's address: the mailbox simulator's bounce
// or complaint address for one in every FeedbackEvery candidates each,
// an ordinary address otherwise.
func (c Config) candidateEmail(i int) string {
	if c.FeedbackEvery > 0 {
		switch i % c.FeedbackEvery {
		case 1:
			return fmt.Sprintf("bounce+candidate-%d@%s", i, localaws.SimulatorDomain)
		case 2:
			return fmt.Sprintf("complaint+candidate-%d@%s", i, localaws.SimulatorDomain)
		}
	}
	return fmt.Sprintf("candidate-%d@chaos.example.com", i)
}
