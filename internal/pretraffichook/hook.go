// Package pretraffichook is the PreTraffic hook of the stack's deploys.
// CodeDeploy invokes it before it moves any traffic to the new version of a
// function; it migrates the database (the embedded migrations, under the
// advisory lock), smoke-tests the API's new version by invoking it
// directly, and reports Succeeded or Failed back to CodeDeploy
// (PutLifecycleEventHookExecutionStatus). On Failed, CodeDeploy stops the
// deploy and CloudFormation rolls the stack back: no request ever reaches
// the new version.
//
// Its migration is a second line: the custom resource SchemaMigration
// (internal/migrate) has migrated before any alias moves, so the
// hook's finds nothing to do, at the cost of one short invocation. It stays
// because it costs so little and guards what the custom resource cannot
// see: CloudFormation sends SchemaMigration an Update only when its
// properties change, so a database put back to an older schema under the
// same secret (restored from a snapshot) is brought forward here, before
// the smoke test, by the next deploy that shifts traffic.
//
// Invoked by hand with an event without a deployment id, it migrates and
// smoke-tests the same way and answers with its result, failing the
// invocation when a step failed: the runbook's check of a running stack.
package pretraffichook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Event is what CodeDeploy sends a lifecycle hook
// (https://docs.aws.amazon.com/codedeploy/latest/userguide/reference-appspec-file-structure-hooks.html#reference-appspec-file-structure-hooks-section-structure-lambda-sample-function).
// Both fields are empty when the hook is invoked by hand.
type Event struct {
	DeploymentID                  string `json:"DeploymentId"`
	LifecycleEventHookExecutionID string `json:"LifecycleEventHookExecutionId"`
}

// The statuses a hook reports.
const (
	Succeeded = "Succeeded"
	Failed    = "Failed"
)

// Reporter tells CodeDeploy how a lifecycle hook went.
type Reporter interface {
	ReportHook(ctx context.Context, deploymentID, executionID, status string) error
}

// Invoker invokes the function under test with an event and returns the
// function's response; a function error (a crash, a timeout) is an error.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// Defaults of Config.
const (
	// DefaultReportMargin is the end of the invocation kept for the report:
	// the steps stop this long before its deadline, so that CodeDeploy
	// always hears Failed rather than waiting an hour for a hook that died.
	DefaultReportMargin = 10 * time.Second
	// DefaultCheckTimeout bounds each smoke check: a cold start of the new
	// version plus the API's own timeout (10 s).
	DefaultCheckTimeout = 30 * time.Second
)

// Config is what a Hook needs. Migrate, API and Reporter are required.
type Config struct {
	// Migrate brings the database's schema up to date: in Lambda, an
	// invocation of the migration function (Invoked).
	Migrate func(ctx context.Context) error
	// API invokes the API's new version.
	API Invoker
	// Reporter reports to CodeDeploy.
	Reporter Reporter
	// Logger gets a line per step and one for the outcome. Nil: none.
	Logger *slog.Logger
	// ReportMargin and CheckTimeout: zero means their defaults.
	ReportMargin time.Duration
	CheckTimeout time.Duration
}

// Hook runs the PreTraffic hook's steps and reports their outcome.
type Hook struct {
	c Config
}

// New returns a Hook; it returns an error when a required dependency is
// missing.
func New(c Config) (*Hook, error) {
	if c.Migrate == nil || c.API == nil || c.Reporter == nil {
		return nil, errors.New("pretraffichook: Migrate, API and Reporter are required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ReportMargin == 0 {
		c.ReportMargin = DefaultReportMargin
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	return &Hook{c: c}, nil
}

// Result is the hook's answer: the status reported and what each step
// said.
type Result struct {
	Status string `json:"status"`
	Steps  []Step `json:"steps"`
}

// Step is the outcome of one step: its name, and its error if it failed.
type Step struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
}

// ErrStepFailed is returned (wrapped) by Handle for an invocation by hand
// in which a step failed.
var ErrStepFailed = errors.New("a step of the deploy hook failed")

// Handle migrates, smoke-tests and reports. The smoke test runs only
// after a successful migration; a failed step stops the rest. A step that
// panics has failed: CodeDeploy hears Failed at once, rather than waiting
// out the hook's timeout for a report that never comes.
//
// For a CodeDeploy event it returns an error only when the report could
// not be made (Lambda then retries the invocation, and every step is safe
// to run again); a Failed that CodeDeploy heard is the hook's job done.
// For an event without a deployment id it reports nothing, and returns
// ErrStepFailed when a step failed.
func (h *Hook) Handle(ctx context.Context, ev Event) (Result, error) {
	steps := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		steps, cancel = context.WithDeadline(ctx, deadline.Add(-h.c.ReportMargin))
		defer cancel()
	}
	log := h.c.Logger.With(slog.String("deployment_id", ev.DeploymentID), slog.String("hook_execution_id", ev.LifecycleEventHookExecutionID))

	res := Result{Status: Succeeded}
	run := func(name string, step func(context.Context) error) bool {
		start := time.Now()
		err := recovered(steps, step)
		s := Step{Name: name}
		if err != nil {
			s.Error = err.Error()
			res.Status = Failed
			log.ErrorContext(ctx, "deploy hook step failed", slog.String("step", name), slog.String("error", s.Error),
				slog.Duration("duration", time.Since(start)))
		} else {
			log.InfoContext(ctx, "deploy hook step passed", slog.String("step", name), slog.Duration("duration", time.Since(start)))
		}
		res.Steps = append(res.Steps, s)
		return err == nil
	}
	if run("migrate", h.c.Migrate) {
		for _, c := range smokeChecks {
			if !run("smoke: "+c.name, func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, h.c.CheckTimeout)
				defer cancel()
				return c.run(ctx, h.c.API, ev)
			}) {
				break
			}
		}
	}

	if ev.DeploymentID == "" {
		log.InfoContext(ctx, "deploy hook invoked by hand; nothing reported", slog.String("status", res.Status))
		if res.Status != Succeeded {
			return res, fmt.Errorf("%w: %+v", ErrStepFailed, res.Steps)
		}
		return res, nil
	}
	if err := h.c.Reporter.ReportHook(ctx, ev.DeploymentID, ev.LifecycleEventHookExecutionID, res.Status); err != nil {
		log.ErrorContext(ctx, "deploy hook could not report", slog.String("status", res.Status), slog.String("error", err.Error()))
		return res, fmt.Errorf("report %s to CodeDeploy: %w", res.Status, err)
	}
	log.InfoContext(ctx, "deploy hook reported", slog.String("status", res.Status))
	return res, nil
}

// recovered runs step, and turns a panic in it into its error.
func recovered(ctx context.Context, step func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return step(ctx)
}
