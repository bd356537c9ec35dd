package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/jobboard/jobboard/internal/dev/faultproxy"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/queue"
)

func TestPlanCoversEveryKindAndRepeatsWithTheSeed(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{Short(), Full()} {
		a := plan(cfg, rand.New(rand.NewPCG(7, 7)))
		b := plan(cfg, rand.New(rand.NewPCG(7, 7)))
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s: the same seed gave two schedules (-first +second):\n%s", cfg.Name, diff)
		}
		if c := plan(cfg, rand.New(rand.NewPCG(8, 8))); cmp.Equal(a, c) {
			t.Errorf("%s: seeds 7 and 8 gave the same schedule", cfg.Name)
		}
		first := map[faultKind]bool{}
		for _, pf := range a[:len(allFaultKinds)] {
			first[pf.Kind] = true
		}
		if len(first) != len(allFaultKinds) {
			t.Errorf("%s: the first %d faults cover %d kinds, want all", cfg.Name, len(allFaultKinds), len(first))
		}
		for i, pf := range a {
			if i > 0 && pf.At-a[i-1].At < cfg.FaultGapMin {
				t.Errorf("%s: faults %d and %d are %v apart, less than %v", cfg.Name, i-1, i, pf.At-a[i-1].At, cfg.FaultGapMin)
			}
			if pf.Kind == faultWorkerFreezeLong && pf.For <= cfg.VisibilityTimeout {
				t.Errorf("%s: a long freeze of %v does not outlast the visibility timeout %v", cfg.Name, pf.For, cfg.VisibilityTimeout)
			}
			if pf.Kind == faultWorkerFreeze && pf.For > cfg.VisibilityTimeout {
				t.Errorf("%s: a short freeze of %v outlasts the visibility timeout", cfg.Name, pf.For)
			}
		}
		for _, pf := range a[len(allFaultKinds):] {
			if pf.At+pf.For > cfg.LoadDuration {
				t.Errorf("%s: an extra %s lasts until %v, the load only %v", cfg.Name, pf.Kind, pf.At+pf.For, cfg.LoadDuration)
			}
		}
		if len(a) <= len(allFaultKinds) && cfg.Name == "full" {
			t.Errorf("%s: %d faults planned, want more than one of each kind", cfg.Name, len(a))
		}
	}
}

func TestShortAndFullAreValid(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{Short(), Full()} {
		cfg.ServerURL = "postgres://x"
		if err := cfg.validate(); err != nil {
			t.Errorf("%s: %v", cfg.Name, err)
		}
		if cfg.sendDeadline() <= 0 || cfg.sendDeadline() >= cfg.InvocationTimeout {
			t.Errorf("%s: send deadline %v", cfg.Name, cfg.sendDeadline())
		}
	}
	if got, want := Full().Changes, 1000; got < want {
		t.Errorf("Full().Changes = %d, want at least %d", got, want)
	}
}

func TestValidateRefusesBadConfigurations(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(*Config){
		"no server":                    func(c *Config) { c.ServerURL = "" },
		"too few applications":         func(c *Config) { c.Changes = 10 * c.Employers * c.JobsPerEmployer * c.Candidates },
		"visibility below the timeout": func(c *Config) { c.VisibilityTimeout = c.InvocationTimeout - 1e9 },
		"fractional visibility":        func(c *Config) { c.VisibilityTimeout += 1e8 },
		"timeout under the margins":    func(c *Config) { c.InvocationTimeout = 5e9 },
		"gaps upside down":             func(c *Config) { c.FaultGapMax = c.FaultGapMin / 2 },
		"no probe":                     func(c *Config) { c.ProbeEvents = 0 },
	} {
		cfg := Short()
		cfg.ServerURL = "postgres://x"
		change(&cfg)
		if err := cfg.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The rule reads the event id from the request the real SES client sends.
func TestSESRuleReadsTheEventIDOfARealSendEmail(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		reqs []*http.Request
		body []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs, body = append(reqs, r), append(body, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"MessageId":"m-1"}`)
	}))
	defer srv.Close()
	sender, err := mail.NewSender(localaws.NewSESClient(srv.URL), mailFrom)
	if err != nil {
		t.Fatal(err)
	}
	const eventID = "6f1c2b7e-8a9d-4e3f-b2c1-0d9e8f7a6b5c"
	if _, err := sender.SendStatusEmail(context.Background(), jobboard.StatusEmail{
		EventID: eventID, To: "cand@example.com", CandidateName: "Cand", JobTitle: "Job", CompanyName: "Co",
		ApplicationID: 1, OldStatus: jobboard.StatusSubmitted, NewStatus: jobboard.StatusReviewing,
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 1 || !isSendEmail(reqs[0]) {
		t.Fatalf("requests = %d, isSendEmail = %v; want one SendEmail", len(reqs), len(reqs) == 1 && isSendEmail(reqs[0]))
	}
	if got := sendEmailEventID([]byte(body[0])); got != eventID {
		t.Errorf("sendEmailEventID = %q, want %q", got, eventID)
	}
	// Without the header, the tag still names the event.
	if got := sendEmailEventID([]byte(`{"EmailTags":[{"Name":"event_id","Value":"from-tag"}]}`)); got != "from-tag" {
		t.Errorf("sendEmailEventID(tags only) = %q", got)
	}
	if got := sendEmailEventID([]byte(`not json`)); got != "" {
		t.Errorf("sendEmailEventID(not json) = %q", got)
	}
}

func TestSESRule(t *testing.T) {
	t.Parallel()
	rule := newSESRule(rand.New(rand.NewPCG(1, 1)))
	send := func(id string) (*http.Request, []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v2/email/outbound-emails", nil)
		return r, []byte(`{"Content":{"Simple":{"Headers":[{"Name":"X-Jobboard-Event-Id","Value":"` + id + `"}]}}}`)
	}
	other := httptest.NewRequest(http.MethodGet, "/store", nil)

	if r, b := send("a"); rule.decide(r, b) != faultproxy.Pass {
		t.Error("no fault switched on, yet the rule did not pass")
	}
	rule.outage.Store(int64(faultproxy.Refuse))
	if rule.decide(other, nil) != faultproxy.Refuse {
		t.Error("an outage spares a request")
	}
	rule.outage.Store(int64(faultproxy.Pass))

	rule.resetOn.Store(true)
	if rule.decide(other, nil) != faultproxy.Pass {
		t.Error("resets hit a request that is not a SendEmail")
	}
	resets := 0
	for i := range 200 {
		r, b := send("e" + strings.Repeat("x", i%3))
		if rule.decide(r, b) == faultproxy.ResetAfter {
			resets++
		}
	}
	if resets < 60 || resets > 140 {
		t.Errorf("%d of 200 sends reset, want about half", resets)
	}
	got := rule.resets()
	total := 0
	for _, n := range got {
		total += n
	}
	if total != resets || len(got) != 3 {
		t.Errorf("resets() = %v (total %d), want %d resets over 3 event ids", got, total, resets)
	}
	rule.resetOn.Store(false)
	if r, b := send("a"); rule.decide(r, b) != faultproxy.Pass {
		t.Error("resets switched off, yet the rule did not pass")
	}
	if got, want := rule.sends.Load(), int64(202); got != want {
		t.Errorf("sends = %d, want %d (the SendEmail calls only)", got, want)
	}
	if got := rule.resetTotal.Load(); got != int64(resets) {
		t.Errorf("resetTotal = %d, want %d", got, resets)
	}
}

// The SQS rule sees the event ids the real publisher sends through the
// proxy, and its outage reaches the real client.
func TestSQSRuleWatchesPublishing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := localaws.NewTestQueue(t, 30, 3)
	p, err := faultproxy.Start(ctx, localaws.SQS(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rule := newSQSRule(rand.New(rand.NewPCG(1, 1)))
	p.SetRule(rule.decide)
	rule.watchFor("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222")
	pub := queue.NewPublisher(localaws.NewSQSClient(p.URL), q.URL)
	ev := func(id string) jobboard.Event {
		return jobboard.Event{Type: jobboard.EventTypeStatusChanged, EventID: id, OccurredAt: time.Now(),
			ApplicationID: 1, NewStatus: jobboard.StatusReviewing}
	}
	if _, err := pub.Publish(ctx, []jobboard.Event{ev("11111111-1111-4111-8111-111111111111"), ev("33333333-3333-4333-8333-333333333333")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"11111111-1111-4111-8111-111111111111"}, rule.published()); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}

	rule.outage.Store(int64(faultproxy.Unavailable))
	if _, err := pub.Publish(ctx, []jobboard.Event{ev("33333333-3333-4333-8333-333333333333")}); err == nil {
		t.Error("publish succeeded during an outage")
	}
	rule.outage.Store(int64(faultproxy.Pass))
	if _, err := pub.Publish(ctx, []jobboard.Event{ev("33333333-3333-4333-8333-333333333333")}); err != nil {
		t.Errorf("publish after the outage: %v", err)
	}
}

// While reordering is on, a held publish reaches the queue after a later
// one: the worker gets the older event second, in a batch of its own.
func TestSQSRuleReorderHoldsAPublishBackUntilALaterOneIsIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := localaws.NewTestQueue(t, 30, 3)
	p, err := faultproxy.Start(ctx, localaws.SQS(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rule := newSQSRule(rand.New(rand.NewPCG(1, 2)))
	first := true
	rule.holdFor = func() time.Duration { // the first call, for long enough
		defer func() { first = false }()
		if first {
			return 3 * time.Second
		}
		return 0
	}
	p.SetRule(rule.decide)
	rule.reorderOn.Store(true)
	pub := queue.NewPublisher(localaws.NewSQSClient(p.URL), q.URL)
	ev := func(n int64) jobboard.Event {
		return jobboard.Event{Type: jobboard.EventTypeStatusChanged, EventID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
			OccurredAt: time.Now(), ApplicationID: 1, NewStatus: jobboard.StatusReviewing, Version: n}
	}

	older := make(chan error, 1)
	go func() {
		_, err := pub.Publish(ctx, []jobboard.Event{ev(2)})
		older <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); rule.held.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first publish was not held")
		}
		runtime.Gosched()
	}
	if _, err := pub.Publish(ctx, []jobboard.Event{ev(3)}); err != nil {
		t.Fatal(err)
	}
	if err := <-older; err != nil {
		t.Fatal(err)
	}
	var order []string
	for len(order) < 2 {
		out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil || len(out.Messages) == 0 {
			t.Fatalf("received %v, %v; want 2 messages", order, err)
		}
		for _, m := range out.Messages {
			order = append(order, aws.ToString(m.Body))
		}
	}
	if !strings.Contains(order[0], ev(3).EventID) || !strings.Contains(order[1], ev(2).EventID) {
		t.Errorf("bodies in order %q; want version 3's, then the held version 2's", order)
	}
	if n := rule.held.Load(); n != 1 {
		t.Errorf("held %d publishes, want 1", n)
	}
}
