package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// TypeAttribute is the name of the String message attribute that carries the
// event type, so consumers and SQS filters can route without parsing bodies.
const TypeAttribute = "type"

// MaxBatch is the most messages one SQS batch call takes.
const MaxBatch = 10

// ErrBatchTooLarge is returned by Publish for more than MaxBatch events.
var ErrBatchTooLarge = errors.New("more than 10 events in one batch")

// Publisher sends status events to an SQS queue. It implements
// jobboard.EventPublisher and is safe for concurrent use.
type Publisher struct {
	client   *sqs.Client
	queueURL string
	// Logger, if set, gets a WARN line for every entry SQS refused. Nil logs
	// nothing.
	Logger *slog.Logger
}

var _ jobboard.EventPublisher = (*Publisher)(nil)

// NewPublisher returns a publisher to the queue at queueURL.
func NewPublisher(client *sqs.Client, queueURL string) *Publisher {
	return &Publisher{client: client, queueURL: queueURL}
}

// Publish sends up to MaxBatch events in one SendMessageBatch call and
// returns the event_ids SQS accepted, in the order given. Entries SQS
// refuses are left out of accepted (and logged if Logger is set) without an
// error: their outbox rows stay unpublished for the sweeper. Events are sent
// as they are; the worker rejects malformed ones into the DLQ. Errors:
// ErrBatchTooLarge; the call failed (nothing is known to be accepted).
func (p *Publisher) Publish(ctx context.Context, evs []jobboard.Event) (accepted []string, err error) {
	if len(evs) == 0 {
		return nil, nil
	}
	if len(evs) > MaxBatch {
		return nil, fmt.Errorf("publish %d events: %w", len(evs), ErrBatchTooLarge)
	}
	entries := make([]types.SendMessageBatchRequestEntry, len(evs))
	byEntry := make(map[string]int, len(evs))
	for i, ev := range evs {
		body, err := jobboard.EncodeEvent(ev)
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		id := uniqueEntryID(ev.EventID, i, byEntry)
		byEntry[id] = i
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:                aws.String(id),
			MessageBody:       aws.String(string(body)),
			MessageAttributes: typeAttribute(ev.Type),
		}
	}
	out, err := p.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.queueURL), Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("publish %d events: %w", len(evs), err)
	}
	ok := make([]bool, len(evs))
	for _, s := range out.Successful {
		if i, found := byEntry[aws.ToString(s.Id)]; found {
			ok[i] = true
		}
	}
	for i, good := range ok {
		if good {
			accepted = append(accepted, evs[i].EventID)
		}
	}
	if p.Logger != nil {
		for _, f := range out.Failed {
			i, found := byEntry[aws.ToString(f.Id)]
			eventID := ""
			if found {
				eventID = evs[i].EventID
			}
			p.Logger.LogAttrs(ctx, slog.LevelWarn, "SQS refused an event",
				slog.String("event_id", eventID), slog.String("code", aws.ToString(f.Code)),
				slog.String("message", aws.ToString(f.Message)), slog.Bool("sender_fault", f.SenderFault))
		}
	}
	return accepted, nil
}

// typeAttribute returns the message attributes for an event type; SQS
// refuses an empty attribute value, so an empty type gets none.
func typeAttribute(typ string) map[string]types.MessageAttributeValue {
	if typ == "" {
		return nil
	}
	return map[string]types.MessageAttributeValue{
		TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(typ)},
	}
}

// maxEntryIDLen is SQS's limit on a batch entry id.
const maxEntryIDLen = 80

// entryID turns an event_id into a batch entry id: SQS allows only ASCII
// letters, digits, '-' and '_', at most 80 of them. UUIDs pass unchanged;
// any other byte becomes '_'.
func entryID(eventID string) string {
	b := []byte(eventID)
	if len(b) > maxEntryIDLen {
		b = b[:maxEntryIDLen]
	}
	for i, c := range b {
		if !isIDByte(c) {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "entry"
	}
	return string(b)
}

// uniqueEntryID returns entryID(eventID), or, if another entry of the batch
// has that id already (the same event twice, or two ids that sanitise
// alike), a variant with a number appended: SQS refuses a batch whose ids
// are not distinct.
func uniqueEntryID(eventID string, index int, taken map[string]int) string {
	id := entryID(eventID)
	for n := index; ; n++ {
		if _, dup := taken[id]; !dup {
			return id
		}
		suffix := "_" + strconv.Itoa(n)
		base := entryID(eventID)
		if len(base)+len(suffix) > maxEntryIDLen {
			base = base[:maxEntryIDLen-len(suffix)]
		}
		id = base + suffix
	}
}

// isIDByte reports whether c is an ASCII letter, digit, '-' or '_'.
func isIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
