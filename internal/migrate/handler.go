// Package migrate is the migration function's handler
// (functions/migrate, MigrateFunction in template.yaml). It answers two
// kinds of invocation:
//
//   - CloudFormation's custom resource requests for SchemaMigration
//     (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref.html):
//     Create and Update migrate and answer SUCCESS, or FAILED with the
//     error, with a PUT to the request's pre-signed ResponseURL; Delete
//     changes nothing and answers SUCCESS, so that deleting the stack, or
//     rolling back a failed create, never waits on the database. Nor does
//     an Update to a lower MigrationLevel of the same database (the
//     rollback of a deploy that brought migrations, or a downgrade): the
//     database already has every migration the older level needs, and
//     migrations are additive, so it answers SUCCESS without connecting. A
//     rollback that fails only because the database cannot be reached would
//     otherwise leave the stack UPDATE_ROLLBACK_FAILED;
//   - any other event (the PreTraffic hook's, an invocation by hand):
//     migrate, and answer with a Result or fail the invocation.
//
// CloudFormation waits for an answer until the resource's ServiceTimeout,
// and a function that dies before it answers leaves it waiting that long.
// So the migration of a request stops AnswerMargin before the invocation's
// deadline, and the answer always goes out, within AnswerTimeout: FAILED,
// saying the migration did not finish; a panic answers FAILED too.
package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/jobboard/jobboard/internal/postgres/schema"
)

// DefaultAnswerMargin is the end of an invocation kept for the answer to
// CloudFormation: a PUT of at most 4 KB to S3.
const DefaultAnswerMargin = 10 * time.Second

// DefaultAnswerTimeout bounds that PUT, within the margin: an answer that
// cannot be made in time fails the invocation, which Lambda retries.
const DefaultAnswerTimeout = 8 * time.Second

// The properties of SchemaMigration (template.yaml) the handler reads.
const (
	// PropertyMigrationLevel is the number of migrations the deploy's
	// migration function embeds.
	PropertyMigrationLevel = "MigrationLevel"
	// PropertyDatabase names the database (its secret).
	PropertyDatabase = "DatabaseSecretArn"
)

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
	// Client makes the answer's PUT. Nil: a client whose Timeout is
	// DefaultAnswerTimeout.
	Client *http.Client
}

// Handler migrates for each invocation and answers it.
type Handler struct {
	c Config
}

// New returns a Handler; it returns an error when Migrate is missing.
func New(c Config) (*Handler, error) {
	if c.Migrate == nil {
		return nil, errors.New("migrate: Migrate is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.AnswerMargin == 0 {
		c.AnswerMargin = DefaultAnswerMargin
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: DefaultAnswerTimeout}
	}
	return &Handler{c: c}, nil
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
		// The invocation's result is empty, as aws-lambda-go's cfn.LambdaWrap
		// makes it: the answer went to the ResponseURL.
		return "", h.resource(ctx, req)
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

// resource handles one custom resource request and answers it: SUCCESS
// with the physical id and data, or FAILED with the error as the reason,
// also when the handling panics. It returns the answer's error.
func (h *Handler) resource(ctx context.Context, req cfn.Event) (err error) {
	physicalID := physicalIDOf(req)
	defer func() {
		if p := recover(); p != nil {
			h.c.Logger.ErrorContext(ctx, "custom resource request panicked", slog.Any("panic", p))
			err = h.answer(ctx, req, physicalID, nil, errors.New(fitReason(req, physicalID, fmt.Sprintf("migrate: panic: %v", p))))
		}
	}()
	data, failure := h.request(ctx, req, physicalID)
	return h.answer(ctx, req, physicalID, data, failure)
}

// answer sends CloudFormation the outcome of req: SUCCESS with data, or
// FAILED with failure's message as the reason. It is a PUT of the JSON
// answer, without a content type (the pre-signed URL is signed without
// one), within the client's timeout and ctx.
func (h *Handler) answer(ctx context.Context, req cfn.Event, physicalID string, data map[string]any, failure error) error {
	resp := cfn.NewResponse(&req)
	resp.PhysicalResourceID, resp.Data, resp.Status = physicalID, data, cfn.StatusSuccess
	if failure != nil {
		resp.Status, resp.Reason, resp.Data = cfn.StatusFailed, failure.Error(), nil
	}
	body, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("answer CloudFormation: %w", err)
	}
	put, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPut, req.ResponseURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("answer CloudFormation: %w", err)
	}
	put.ContentLength = int64(len(body))
	r, err := h.c.Client.Do(put)
	if err != nil {
		return fmt.Errorf("answer CloudFormation: %w", err)
	}
	defer r.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(r.Body, 1024))
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("answer CloudFormation: the response URL answered %s: %.300s", r.Status, msg)
	}
	return nil
}

// request handles one custom resource request; it returns the answer's
// data, or the failure to answer.
func (h *Handler) request(ctx context.Context, req cfn.Event, physicalID string) (data map[string]any, failure error) {
	log := h.c.Logger.With(slog.String("request_type", string(req.RequestType)), slog.String("request_id", req.RequestID),
		slog.String("stack_id", req.StackID), slog.String("logical_resource_id", req.LogicalResourceID))
	switch req.RequestType {
	case cfn.RequestDelete:
		// Migrations are additive and the schema outlives the stack: there
		// is nothing to undo, and a Delete must succeed for the stack (or
		// the rollback of its failed create) to finish.
		log.InfoContext(ctx, "custom resource deleted; the schema stays as it is")
		return nil, nil
	case cfn.RequestCreate:
	case cfn.RequestUpdate:
		if from, to, ok := downgrade(req); ok {
			log.InfoContext(ctx, "update to a lower migration level of the same database (a rollback or a downgrade); nothing to migrate, the database not contacted",
				slog.Int("from_level", from), slog.Int("to_level", to))
			return nil, nil
		}
	default:
		return nil, h.failure(ctx, log, req, physicalID, fmt.Errorf("unknown request type %q", req.RequestType))
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
		return nil, h.failure(ctx, log, req, physicalID, err)
	}
	h.logApplied(ctx, log, r, start)
	return map[string]any{"SchemaVersion": strconv.Itoa(int(r.To))}, nil
}

// downgrade reports an Update whose MigrationLevel is lower than the one
// it replaces, for the same database, and the two levels. A request
// without levels (an older template's) is no downgrade.
func downgrade(req cfn.Event) (from, to int, ok bool) {
	level := func(props map[string]any) (int, bool) {
		n, err := strconv.Atoi(fmt.Sprint(props[PropertyMigrationLevel]))
		return n, err == nil && n >= 0
	}
	to, okTo := level(req.ResourceProperties)
	from, okFrom := level(req.OldResourceProperties)
	same := fmt.Sprint(req.ResourceProperties[PropertyDatabase]) == fmt.Sprint(req.OldResourceProperties[PropertyDatabase])
	return from, to, okTo && okFrom && to < from && same
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
		slog.Int("lock_timeouts", r.LockTimeouts), slog.Duration("duration", time.Since(start))}
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
