package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// SES's AccessDeniedException (the role's policy does not let it send as
// MailFrom, through this configuration set, or in the sandbox to this
// recipient), through the real Sender, is a refusal: the claim is
// released, the batch stops, the record backs off as long as for a paused
// account, an ERROR line says refused and the SendRefused metric, which
// WorkerSendRefusedAlarm reads, counts it. It is never an unknown failure
// retried at once until the DLQ.
func TestAccessDeniedIsARefusal(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	var calls atomic.Int64
	ses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message":"User: arn:aws:sts::123456789012:assumed-role/jobboard-WorkerFunctionRole/x is not authorized to perform: ses:SendEmail"}`)
	}))
	t.Cleanup(ses.Close)
	sender, err := mail.NewSender(localaws.NewSESClient(ses.URL), "jobboard <jobs@example.com>")
	if err != nil {
		t.Fatal(err)
	}
	redelivery := recording(e)
	h := e.Handler(t, sender, func(c *worker.Config) { c.Redelivery = redelivery; c.Concurrency = 1 })
	var evs []jobboard.Event
	for range 2 {
		evs = append(evs, e.NewApp(t).Event())
		e.SendBody(t, workertest.Body(t, evs[len(evs)-1]))
	}
	batch := e.Receive(t, 10)
	if len(batch.Records) != 2 {
		t.Fatalf("received %d records, want 2", len(batch.Records))
	}
	resp, err := h.Handle(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 2 {
		t.Fatalf("Handle = %+v, %v; want both failed, to be retried", resp, err)
	}
	for _, ev := range evs {
		wantClaim(t, e, ev.EventID, "")
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("SES called %d times; want 1 (the batch stops)", n)
	}
	for _, r := range batch.Records {
		wantBackoff(t, redelivery, r, 15*time.Minute, 30*time.Minute)
	}
	got := map[string]int{}
	for _, l := range e.Logs.Records(t) {
		got[l["outcome"].(string)]++
		if l["outcome"] == "refused" && l["level"] != "ERROR" {
			t.Errorf("refused logged at %v, want ERROR", l["level"])
		}
	}
	if got["refused"] != 1 || got["not_started"] != 1 || got["send_failed"] != 0 {
		t.Errorf("outcomes = %v, want 1 refused and 1 not_started", got)
	}
	if ms := e.Logs.Metrics(t); len(ms) != 1 || ms[0]["SendRefused"] != 1.0 || ms[0]["SendFailures"] != 1.0 || ms[0]["SendingPaused"] != 0.0 {
		t.Errorf("metrics = %v, want SendRefused 1, SendFailures 1", ms)
	}
}
