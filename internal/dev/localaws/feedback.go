package localaws

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SimulatorDomain is the domain of SES's mailbox simulator. As with SES,
// an email to bounce@ (or bounce+label@) it bounces for good, one to
// complaint@ is delivered and then complained about, and any other
// address is delivered.
const SimulatorDomain = "simulator.amazonses.com"

// What the mailbox simulator does with an address.
const (
	SimulateDelivery  = "delivery"
	SimulateBounce    = "bounce"
	SimulateComplaint = "complaint"
)

// Simulated says what the mailbox simulator does with an email to addr:
// SimulateBounce, SimulateComplaint, or SimulateDelivery.
func Simulated(addr string) string {
	local, domain, ok := strings.Cut(strings.ToLower(strings.TrimSpace(addr)), "@")
	if !ok || domain != SimulatorDomain {
		return SimulateDelivery
	}
	local, _, _ = strings.Cut(local, "+")
	switch local {
	case "bounce":
		return SimulateBounce
	case "complaint":
		return SimulateComplaint
	}
	return SimulateDelivery
}

// FeedbackEmitter plays SES's event publishing for the SES stand-in: it
// reads the emails the stand-in accepted and, for each, sends to the
// feedback queue the event records SES would publish through SNS with raw
// message delivery (the template's route): a Delivery, a Bounce
// (permanent) for the simulator's bounce addresses, a Delivery and then a
// Complaint for its complaint addresses. Each record carries the email's
// event_id tag, read from its X-Jobboard-Event-Id header. It sends each
// email's events once per emitter; SQS and the feedback function do the
// rest, as on AWS.
type FeedbackEmitter struct {
	SESEndpoint string
	SQS         *sqs.Client
	QueueURL    string
	// Interval between reads of the stand-in's store; zero: 200 ms.
	Interval time.Duration

	mu   sync.Mutex
	seen map[string]int64 // message id → accepted at (Unix seconds)
	// Emitted counts the records sent, by simulated outcome.
	emitted map[string]int
}

// Run emits until ctx ends; it returns nil then. A failed read or send is
// retried at the next tick (the emails stay in the store).
func (e *FeedbackEmitter) Run(ctx context.Context) error {
	interval := e.Interval
	if interval == 0 {
		interval = 200 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_, _ = e.EmitOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Emitted returns how many emails' feedback was sent, by what the
// simulator did with them.
func (e *FeedbackEmitter) Emitted() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int, len(e.emitted))
	for k, v := range e.emitted {
		out[k] = v
	}
	return out
}

// EmitOnce sends the feedback of the emails accepted since the last call
// and returns how many emails it covered. Errors: the store could not be
// read, or the queue refused a record (that email is tried again next
// time).
func (e *FeedbackEmitter) EmitOnce(ctx context.Context) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen, e.emitted = map[string]int64{}, map[string]int{}
	}
	var newest int64
	for _, at := range e.seen {
		newest = max(newest, at)
	}
	// The store answers by whole seconds: read from a second before the
	// newest seen and skip what was sent already.
	emails, err := emailsSince(ctx, e.SESEndpoint, newest-1)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range emails {
		if _, done := e.seen[m.MessageID]; done || len(m.Destination.To) == 0 {
			continue
		}
		what := Simulated(m.Destination.To[0])
		for _, rec := range feedbackRecords(m, what) {
			if _, err := e.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.QueueURL), MessageBody: aws.String(rec)}); err != nil {
				return n, fmt.Errorf("emit feedback of %s: %w", m.MessageID, err)
			}
		}
		e.seen[m.MessageID] = m.At
		e.emitted[what]++
		n++
	}
	// Forget what the next read cannot return again.
	for id, at := range e.seen {
		if at < newest-2 {
			delete(e.seen, id)
		}
	}
	return n, nil
}

// SendFeedbackRecords sends the records of one simulated outcome for an
// email by hand (tests that deliver feedback twice, or out of order).
func SendFeedbackRecords(ctx context.Context, client *sqs.Client, queueURL string, m Email, what string) error {
	entries := []sqstypes.SendMessageBatchRequestEntry{}
	for i, rec := range feedbackRecords(m, what) {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(rec)})
	}
	out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	if err == nil && len(out.Failed) > 0 {
		err = fmt.Errorf("%d records refused: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
	}
	if err != nil {
		return fmt.Errorf("send feedback of %s: %w", m.MessageID, err)
	}
	return nil
}

// feedbackRecords are the SES event records of one email, as JSON.
func feedbackRecords(m Email, what string) []string {
	at := time.Unix(m.At, 0).UTC()
	mail := map[string]any{
		"timestamp":   at.Format(time.RFC3339Nano),
		"source":      m.From,
		"messageId":   m.MessageID,
		"destination": m.Destination.To,
		"tags":        map[string][]string{"ses:configuration-set": {"local"}},
	}
	if id := m.Header("X-Jobboard-Event-Id"); id != "" {
		mail["tags"].(map[string][]string)["event_id"] = []string{id}
	}
	to := m.Destination.To
	record := func(fields map[string]any) string {
		fields["mail"] = mail
		b, _ := json.Marshal(fields) // plain maps of strings: cannot fail
		return string(b)
	}
	delivery := record(map[string]any{"eventType": "Delivery", "delivery": map[string]any{
		"timestamp": at.Add(time.Second).Format(time.RFC3339Nano), "recipients": to,
		"processingTimeMillis": 1000, "smtpResponse": "250 2.6.0 Message received"}})
	switch what {
	case SimulateBounce:
		var rs []map[string]string
		for _, a := range to {
			rs = append(rs, map[string]string{"emailAddress": a, "action": "failed", "status": "5.1.1",
				"diagnosticCode": "smtp; 550 5.1.1 user unknown"})
		}
		return []string{record(map[string]any{"eventType": "Bounce", "bounce": map[string]any{
			"bounceType": "Permanent", "bounceSubType": "General", "bouncedRecipients": rs,
			"timestamp": at.Add(time.Second).Format(time.RFC3339Nano), "feedbackId": m.MessageID + "-bounce"}})}
	case SimulateComplaint:
		var rs []map[string]string
		for _, a := range to {
			rs = append(rs, map[string]string{"emailAddress": a})
		}
		return []string{delivery, record(map[string]any{"eventType": "Complaint", "complaint": map[string]any{
			"complainedRecipients": rs, "complaintFeedbackType": "abuse",
			"timestamp": at.Add(2 * time.Second).Format(time.RFC3339Nano), "feedbackId": m.MessageID + "-complaint"}})}
	}
	return []string{delivery}
}

// emailsSince returns the emails the stand-in accepted at or after the
// Unix second since.
func emailsSince(ctx context.Context, endpoint string, since int64) ([]Email, error) {
	var store struct {
		Emails []Email `json:"emails"`
	}
	body, err := sesStoreRequest(ctx, "GET", fmt.Sprintf("%s/store?since=%d", endpoint, max(since, 0)))
	if err != nil {
		return nil, fmt.Errorf("list emails: %w", err)
	}
	if err := json.Unmarshal(body, &store); err != nil {
		return nil, fmt.Errorf("list emails: decode store: %w", err)
	}
	return store.Emails, nil
}
