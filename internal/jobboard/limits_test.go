package jobboard_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// docs/api.md lists every limit for clients; its table says what
// limits.go says.
func TestLimitsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	v, r, d := jobboard.DefaultVerificationPolicy, jobboard.DefaultPasswordResetPolicy, jobboard.DefaultWebhookDispatchPolicy
	if v.Window != time.Hour || r.Window != time.Hour || d.Window != time.Hour || jobboard.WebhookNoticeInterval != 24*time.Hour {
		t.Fatal("a window is no longer an hour (or the notices' a day): say so in docs/api.md, then here")
	}
	for _, row := range []string{
		fmt.Sprintf("| failed logins to one account from one client | %d, then blocked %s, doubling, at most %d min;",
			jobboard.DefaultLoginPolicy.FreeAttempts, seconds(jobboard.DefaultLoginPolicy.BaseDelay), int(jobboard.DefaultLoginPolicy.MaxDelay.Minutes())),
		fmt.Sprintf("| %d, then as above; forgotten after an hour", jobboard.DefaultClientPolicy.FreeAttempts),
		fmt.Sprintf("| one a minute per account; %d an hour per account and per address |", v.PerAddress),
		fmt.Sprintf("| password reset emails | one a minute, %d an hour per address |", r.PerAddress),
		fmt.Sprintf("| companies one employer creates | %d |", jobboard.MaxCompaniesPerEmployer),
		fmt.Sprintf("| webhook endpoints of one company | %d |", jobboard.MaxWebhookEndpoints),
		fmt.Sprintf("| %d an hour per endpoint, %d an hour per company;", d.PerEndpoint, d.PerCompany),
		"| members with a verified address only; one a day per endpoint |",
	} {
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/api.md's limits do not say %q", row)
		}
	}
	if v.Cooldown != time.Minute || r.Cooldown != time.Minute || v.PerAccount != v.PerAddress {
		t.Error("the verification or reset cooldown changed: say so in docs/api.md, then here")
	}
}

func seconds(d time.Duration) string { return fmt.Sprintf("%d s", int(d.Seconds())) }
