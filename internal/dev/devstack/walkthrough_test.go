package devstack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// walkthroughHeading is the README section whose first sh block a newcomer
// pastes against `make dev`.
const walkthroughHeading = "## First ten minutes"

// walkthrough returns the commands of the README's first ten minutes, as
// written there.
func walkthrough(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var block []string
	inSection, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inBlock && line == "```":
			return strings.Join(block, "\n") + "\n"
		case inBlock:
			block = append(block, line)
		case line == walkthroughHeading:
			inSection = true
		case inSection && strings.HasPrefix(line, "## "):
			t.Fatalf("README.md: %q has no ```sh block", walkthroughHeading)
		case inSection && line == "```sh":
			inBlock = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("README.md has no %q section with a closed ```sh block", walkthroughHeading)
	return ""
}

// walkthroughTarget is the walkthrough's first line: where the stack is.
var walkthroughTarget = regexp.MustCompile(`^API=(\S+) SES=(\S+)(\s+#.*)?\n`)

// The README's first ten minutes, run as written (only the two URLs of its
// first line moved to a stack on free ports) against `make dev`'s stack,
// twice, as a newcomer pasting it twice would: each run registers fresh
// accounts, verifies the candidate with the token from the SES stand-in,
// posts a job, applies, moves the application with If-Match (and sees a
// stale If-Match refused), and finds the candidate's email.
func TestFirstTenMinutes(t *testing.T) {
	script := walkthrough(t)
	m := walkthroughTarget.FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("the walkthrough does not start with API=… SES=…:\n%s", script)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", DefaultAPIPort); m[1] != want {
		t.Errorf("the walkthrough's API is %s; make dev's is %s", m[1], want)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", DefaultSESPort); m[2] != want {
		t.Errorf("the walkthrough's SES is %s; make dev's is %s", m[2], want)
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s (README, Prerequisites): %v", tool, err)
		}
	}

	st, _ := startStack(t, testConfig(t, buildFunctions(t), pgtest.NewURL(t)))
	script = walkthroughTarget.ReplaceAllLiteralString(script, "API="+st.APIURL+" SES="+st.SESEndpoint+"\n")

	candidate := regexp.MustCompile(`"to": "(cand[^"]+)"`)
	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.WaitDelay = 5 * time.Second
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("run %d: the walkthrough failed: %v\n%s", run, err, out.String())
		}
		t.Logf("run %d:\n%s", run, out.String())
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`"email_verified":true`),
			regexp.MustCompile(`(?im)^etag: "1"\r?$`),
			regexp.MustCompile(`"status":"reviewing","version":2\}`),
			regexp.MustCompile(`"status":412,`),
			regexp.MustCompile(`"subject": "Initech is reviewing your application for Go Developer"`),
		} {
			if !want.Match(out.Bytes()) {
				t.Errorf("run %d: the output does not match %s", run, want)
			}
		}
		// Independently of what the script printed: the candidate got the
		// verification email and one status email, no more.
		to := candidate.FindSubmatch(out.Bytes())
		if to == nil {
			t.Fatalf("run %d: no candidate address in the output", run)
		}
		waitQueueEmpty(t, st.SQSEndpoint, st.QueueURL)
		emails, err := localaws.EmailsTo(context.Background(), st.SESEndpoint, string(to[1]))
		if err != nil {
			t.Fatal(err)
		}
		if len(emails) != 2 || !strings.Contains(emails[0].Body.Text, "verify-email?token=") || !strings.Contains(emails[1].Subject, "reviewing") {
			var subjects []string
			for _, e := range emails {
				subjects = append(subjects, e.Subject)
			}
			t.Errorf("run %d: emails to %s: %q; want the verification email, then the one about reviewing", run, to[1], subjects)
		}
	}
}
