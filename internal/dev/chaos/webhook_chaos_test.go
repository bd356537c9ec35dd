package chaos_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/chaos"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The short webhook run: receivers killed, slowed and failing, delivery
// functions killed and frozen, while applications, status changes,
// withdrawals and job closings flow. It fails on any delivery lost, any
// committed change without its event, any change delivered under two
// webhook-ids, any request that does not verify, or a stack that does not
// settle.
func TestShortWebhookRunKeepsThePromise(t *testing.T) {
	t.Parallel() // the two short runs mostly wait (on faults, on settling): side by side they take the time of one
	bin, err := chaos.BuildOnce()
	if err != nil {
		t.Fatal(err)
	}
	cfg := chaos.WebhookShort()
	cfg.ServerURL = pgtest.ServerURL()
	cfg.Seed = time.Now().UnixNano()
	cfg.BinDir = bin
	cfg.Out = &lineLogger{t: t}

	rep, err := chaos.RunWebhooks(context.Background(), cfg)
	if rep != nil {
		var b bytes.Buffer
		rep.Print(&b)
		t.Logf("\n%s", b.String())
	}
	if err != nil {
		t.Fatalf("webhook chaos run: %v", err)
	}
	if !rep.Passed() {
		t.Fatalf("the short webhook run (seed %d) broke the promise; repeat it with\n"+
			"  make chaos CHAOS_FLAGS='-short -only webhooks -seed %d'\n- %s", cfg.Seed, cfg.Seed, strings.Join(rep.Failures, "\n- "))
	}
}
