package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/dev/faultproxy"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
)

// retention is how old an event must be for the pipeline to refuse it: the
// sweeper's default RETENTION_DAYS, which the run does not change.
const retention = jobboard.DefaultRetention

// Settle is one wait for the system to come to rest.
type Settle struct {
	After   string
	Took    time.Duration
	Settled bool
	// Last is the state seen last, e.g. "pending=0 queue=2 ses_in_flight=0
	// busy_sessions=1 ses_calls=+3"; it says what was still moving when a
	// wait timed out.
	Last string
}

// settledPolls is how many polls in a row must find the system at rest.
const settledPolls = 3

// settle waits, at most cfg.SettleTimeout, until the outbox has nothing
// left to publish (rows older than the retention aside), the queue is
// empty (nothing visible, in flight or delayed), no SES call is under way,
// no worker session is inside a transaction, and no SES call was made
// since the last poll, on settledPolls polls in a row.
func settle(ctx context.Context, st *stack, after string) (Settle, error) {
	start := time.Now()
	s := Settle{After: after}
	calls := requests(st.sesProxy)
	quiet := 0
	for time.Since(start) < st.cfg.SettleTimeout {
		if err := pause(ctx, 500*time.Millisecond); err != nil {
			return s, err
		}
		pending, perr := st.db.pending(ctx, retention)
		depth, qerr := st.queueDepth(ctx, st.queueURL)
		// Every email's feedback emitted and applied: the verdict reads the
		// suppressions.
		emitted, eerr := st.emitter.EmitOnce(ctx)
		fdepth, ferr := st.queueDepth(ctx, st.feedbackQueueURL)
		if qerr == nil {
			qerr = errors.Join(eerr, ferr)
		}
		depth += emitted + fdepth
		busy, berr := st.db.busyWorkers(ctx)
		inFlight := st.sesProxy.InFlight()
		now := requests(st.sesProxy)
		s.Last = fmt.Sprintf("pending=%d queue=%d ses_in_flight=%d busy_sessions=%d ses_calls=+%d", pending, depth, inFlight, busy, now-calls)
		if perr != nil || qerr != nil || berr != nil {
			s.Last += fmt.Sprintf(" (errors: %v %v %v)", perr, qerr, berr)
		}
		atRest := perr == nil && qerr == nil && berr == nil && pending == 0 && depth == 0 && inFlight == 0 && busy == 0 && now == calls
		calls = now
		if !atRest {
			quiet = 0
			continue
		}
		if quiet++; quiet == settledPolls {
			s.Settled, s.Took = true, time.Since(start)
			return s, nil
		}
	}
	s.Took = time.Since(start)
	return s, nil
}

// requests counts the requests a proxy has handled, whatever their fault.
func requests(p *faultproxy.Proxy) int64 {
	var n int64
	for _, f := range []faultproxy.Fault{faultproxy.Pass, faultproxy.Refuse, faultproxy.ResetAfter, faultproxy.Hang, faultproxy.Unavailable} {
		n += p.Count(f)
	}
	return n
}

// emailCounts reads the SES stand-in's store: status emails per event id,
// and how many emails carry no event id at all. The seeded accounts'
// verification emails are left out.
func emailCounts(ctx context.Context, st *stack) (map[string]int, int, error) {
	all, err := localaws.Emails(ctx, st.sesServer.Endpoint)
	if err != nil {
		return nil, 0, err
	}
	verification, err := st.db.verificationEvents(ctx)
	if err != nil {
		return nil, 0, err
	}
	counts, none := map[string]int{}, 0
	for _, e := range all {
		switch id := e.Header(mail.EventIDHeader); {
		case verification[id]:
		case id != "":
			counts[id]++
		default:
			none++
		}
	}
	return counts, none, nil
}

// emailSequence returns the event ids of the status emails in the order
// the SES stand-in accepted them (its store keeps that order).
func emailSequence(ctx context.Context, st *stack) ([]string, error) {
	all, err := localaws.Emails(ctx, st.sesServer.Endpoint)
	if err != nil {
		return nil, err
	}
	verification, err := st.db.verificationEvents(ctx)
	if err != nil {
		return nil, err
	}
	var seq []string
	for _, e := range all {
		if id := e.Header(mail.EventIDHeader); id != "" && !verification[id] {
			seq = append(seq, id)
		}
	}
	return seq, nil
}

// dlqMessage is a message read from the dead-letter queue.
type dlqMessage struct {
	body          string
	attributes    map[string]types.MessageAttributeValue
	receiptHandle string
}

// eventID is the message's event_id, or "" when its body has none.
func (m dlqMessage) eventID() string {
	var v struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal([]byte(m.body), &v) != nil {
		return ""
	}
	return v.EventID
}

// readDLQ receives every message of the dead-letter queue, hiding each for
// a few minutes so that no message is read twice.
func readDLQ(ctx context.Context, st *stack) ([]dlqMessage, error) {
	var out []dlqMessage
	for {
		got, err := st.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(st.dlqURL),
			MaxNumberOfMessages:   10,
			VisibilityTimeout:     300,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return out, fmt.Errorf("read the DLQ: %w", err)
		}
		if len(got.Messages) == 0 {
			return out, nil
		}
		for _, m := range got.Messages {
			out = append(out, dlqMessage{body: aws.ToString(m.Body), attributes: m.MessageAttributes, receiptHandle: aws.ToString(m.ReceiptHandle)})
		}
	}
}

// redrive moves the messages read from the DLQ back to the main queue:
// send a copy, then delete the original. fauxqs 1.9.2 does not implement
// StartMessageMoveTask (it answers InvalidAction), so this does by hand what
// that call does on AWS.
func redrive(ctx context.Context, st *stack, msgs []dlqMessage) (int, error) {
	moved := 0
	for _, m := range msgs {
		if _, err := st.sqs.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl: aws.String(st.queueURL), MessageBody: aws.String(m.body), MessageAttributes: m.attributes,
		}); err != nil {
			return moved, fmt.Errorf("redrive: send: %w", err)
		}
		if _, err := st.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{
			QueueUrl: aws.String(st.dlqURL), ReceiptHandle: aws.String(m.receiptHandle),
		}); err != nil {
			return moved, fmt.Errorf("redrive: delete: %w", err)
		}
		moved++
	}
	return moved, nil
}

// deadLetter puts, straight into the dead-letter queue, copies of
// cfg.DeadLettered events that were emailed exactly once: the state after
// one copy of an event was emailed and another ran out of receives. Their
// redrive must not email them again. It returns how many it put there.
func deadLetter(ctx context.Context, st *stack, rng *rand.Rand, emails map[string]int) (int, error) {
	var once []string
	for _, id := range sortedKeys(emails) {
		if emails[id] == 1 {
			once = append(once, id)
		}
	}
	rng.Shuffle(len(once), func(i, j int) { once[i], once[j] = once[j], once[i] })
	n := min(st.cfg.DeadLettered, len(once))
	for _, id := range once[:n] {
		body, err := st.db.outboxPayload(ctx, id)
		if err != nil {
			return 0, err
		}
		ev, err := jobboard.DecodeEvent(body)
		if err != nil {
			return 0, fmt.Errorf("dead-letter a copy of %s: %w", id, err)
		}
		wire, err := jobboard.EncodeEvent(ev)
		if err != nil {
			return 0, err
		}
		if _, err := st.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.dlqURL), MessageBody: aws.String(string(wire))}); err != nil {
			return 0, fmt.Errorf("dead-letter a copy of %s: %w", id, err)
		}
	}
	if n < st.cfg.DeadLettered {
		return n, fmt.Errorf("dead-letter: only %d events were emailed exactly once, want %d", n, st.cfg.DeadLettered)
	}
	return n, nil
}
