// Package schemamigration is the migration function's handler
// (functions/migrate, MigrateFunction in template.yaml). It answers two
// kinds of invocation:
//
//   - CloudFormation's custom resource requests for SchemaMigration
//     (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref.html):
//     Create and Update migrate and answer SUCCESS, or FAILED with the
//     error, with a PUT to the request's pre-signed ResponseURL (through
//     aws-lambda-go's cfn package); Delete changes nothing and answers
//     SUCCESS, so that deleting the stack, or rolling back a failed
//     create, never waits on the database;
//   - any other event (the PreTraffic hook's, an invocation by hand):
//     migrate, and answer with a Result or fail the invocation.
//
// CloudFormation waits for an answer until the resource's ServiceTimeout,
// and a function that dies before it answers leaves it waiting that long.
// So the migration of a request stops AnswerMargin before the invocation's
// deadline, and the answer always goes out: FAILED, saying the migration
// did not finish.
package schemamigration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/jobboard/jobboard/internal/postgres/schema"
)

// DefaultAnswerMargin is the end of an invocation kept for the answer to
// CloudFormation: a PUT of at most 4 KB to S3.
const DefaultAnswerMargin = 10 * time.Second

// maxResponseBytes is the largest answer CloudFormation reads
// (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html):
// a longer one is lost, and the stack waits for the ServiceTimeout.
const maxResponseBytes = 4096

// Config is what a Handler needs. Migrate is required.
type Config struct {
	// Migrate brings the database's schema up to date and reports what it
	// did: schema.Apply on the database the function is configured for.
	Migrate func(ctx context.Context) (schema.Report, error)
	// Logger gets a line per invocation. Nil: none.
	Logger *slog.Logger
	// AnswerMargin: zero means DefaultAnswerMargin.
	AnswerMargin time.Duration
}

// Handler migrates for each invocation and answers it.
type Handler struct {
	c        Config
	resource cfn.CustomResourceLambdaFunction
}

// New returns a Handler; it returns an error when Migrate is missing.
func New(c Config) (*Handler, error) {
	if c.Migrate == nil {
		return nil, errors.New("schemamigration: Migrate is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.AnswerMargin == 0 {
		c.AnswerMargin = DefaultAnswerMargin
	}
	h := &Handler{c: c}
	h.resource = cfn.LambdaWrap(h.request)
	return h, nil
}

// Result is the answer to an invocation that is not CloudFormation's: the
// schema's version after the migration, how many migrations it applied,
// and whether a newer build had migrated the database further (then
// nothing was applied; see schema.Report).
type Result struct {
	Migrated      bool  `json:"migrated"`
	SchemaVersion int32 `json:"schema_version"`
	Applied       int32 `json:"applied"`
	Ahead         bool  `json:"ahead,omitempty"`
}

// ErrMalformedRequest is returned (wrapped) for an event that names a
// custom resource request type but lacks what an answer needs.
var ErrMalformedRequest = errors.New("malformed custom resource request")

// Handle answers one invocation. An event with a RequestType is a custom
// resource request: the answer goes to its ResponseURL, and the error is
// the PUT's (Lambda then retries the invocation; every step is safe to run
// again). Any other event migrates and returns a Result, or the
// migration's error.
func (h *Handler) Handle(ctx context.Context, event json.RawMessage) (any, error) {
	var req cfn.Event
	if json.Unmarshal(event, &req) == nil && req.RequestType != "" {
		if req.ResponseURL == "" || req.RequestID == "" || req.StackID == "" || req.LogicalResourceID == "" {
			return nil, fmt.Errorf("%w: RequestType %q without ResponseURL, RequestId, StackId or LogicalResourceId", ErrMalformedRequest, req.RequestType)
		}
		return h.resource(ctx, req)
	}
	start := time.Now()
	r, err := h.c.Migrate(ctx)
	if err != nil {
		h.c.Logger.ErrorContext(ctx, "migration failed", slog.String("error", err.Error()))
		return nil, err
	}
	h.logApplied(ctx, h.c.Logger, r, start)
	return Result{Migrated: true, SchemaVersion: r.To, Applied: r.To - r.From, Ahead: r.Ahead()}, nil
}

// request handles one custom resource request for cfn.LambdaWrap, which
// turns its outcome into the answer: SUCCESS with the physical id and
// data, or FAILED with the error as the reason.
func (h *Handler) request(ctx context.Context, req cfn.Event) (physicalID string, data map[string]any, err error) {
	physicalID = physicalIDOf(req)
	log := h.c.Logger.With(slog.String("request_type", string(req.RequestType)), slog.String("request_id", req.RequestID),
		slog.String("stack_id", req.StackID), slog.String("logical_resource_id", req.LogicalResourceID))
	switch req.RequestType {
	case cfn.RequestDelete:
		// Migrations are additive and the schema outlives the stack: there
		// is nothing to undo, and a Delete must succeed for the stack (or
		// the rollback of its failed create) to finish.
		log.InfoContext(ctx, "custom resource deleted; the schema stays as it is")
		return physicalID, nil, nil
	case cfn.RequestCreate, cfn.RequestUpdate:
	default:
		return physicalID, nil, h.failure(ctx, log, req, physicalID, fmt.Errorf("unknown request type %q", req.RequestType))
	}

	migrate := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		migrate, cancel = context.WithDeadline(ctx, deadline.Add(-h.c.AnswerMargin))
		defer cancel()
	}
	start := time.Now()
	r, err := h.c.Migrate(migrate)
	if err != nil {
		if errors.Is(migrate.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("the migration did not finish within the function's timeout (stopped after %s): %w", time.Since(start).Round(time.Second), err)
		}
		return physicalID, nil, h.failure(ctx, log, req, physicalID, err)
	}
	h.logApplied(ctx, log, r, start)
	return physicalID, map[string]any{"SchemaVersion": strconv.Itoa(int(r.To))}, nil
}

// physicalIDOf is the resource's physical id: the one CloudFormation
// already has (an Update or Delete must answer the same, or CloudFormation
// takes the update for a replacement and deletes the old one), or for a
// Create one made from the stack and the logical id, the same whether the
// create succeeds or fails (a failed create's rollback sends a Delete with
// it).
func physicalIDOf(req cfn.Event) string {
	if req.RequestType != cfn.RequestCreate && req.PhysicalResourceID != "" {
		return req.PhysicalResourceID
	}
	return req.StackID + "/" + req.LogicalResourceID
}

func (h *Handler) logApplied(ctx context.Context, log *slog.Logger, r schema.Report, start time.Time) {
	attrs := []any{slog.Int("from", int(r.From)), slog.Int("to", int(r.To)), slog.Int("embedded", int(r.Embedded)),
		slog.Duration("duration", time.Since(start))}
	if r.Ahead() {
		log.WarnContext(ctx, "the database is ahead of this version's migrations; nothing applied", attrs...)
		return
	}
	log.InfoContext(ctx, "migrations applied", attrs...)
}

// failure logs err and returns it as the reason CloudFormation shows,
// shortened to fit the answer's size limit.
func (h *Handler) failure(ctx context.Context, log *slog.Logger, req cfn.Event, physicalID string, err error) error {
	log.ErrorContext(ctx, "custom resource request failed", slog.String("error", err.Error()))
	reason := "migrate: " + err.Error()
	if lambdacontext.LogStreamName != "" {
		reason += " (log stream " + lambdacontext.LogStreamName + ")"
	}
	return errors.New(fitReason(req, physicalID, reason))
}

// fitReason returns reason, or its longest beginning that, with an
// ellipsis, keeps the FAILED answer that carries it within
// maxResponseBytes as JSON.
func fitReason(req cfn.Event, physicalID, reason string) string {
	resp := cfn.NewResponse(&req)
	resp.Status, resp.PhysicalResourceID = cfn.StatusFailed, physicalID
	fits := func(r string) bool {
		resp.Reason = r
		body, err := json.Marshal(resp)
		return err == nil && len(body) <= maxResponseBytes
	}
	if fits(reason) {
		return reason
	}
	runes := []rune(reason)
	// The longest prefix that fits, by bisection: n fits, hi does not.
	n, hi := 0, len(runes)
	for hi-n > 1 {
		mid := (n + hi) / 2
		if fits(string(runes[:mid]) + "…") {
			n = mid
		} else {
			hi = mid
		}
	}
	return string(runes[:n]) + "…"
}
