package devstack

import (
	"fmt"
	"io"
	"strings"
)

// DefaultStateFile is where `make dev` writes its state, and where `make
// invoke` and `make poison` look for it (the Makefile's DEV_STATE).
const DefaultStateFile = "build/dev/stack.json"

// nextStatus is the next step of the employer's workflow, for the banner's
// example; terminal statuses have none.
var nextStatus = map[string]string{
	"submitted": "reviewing",
	"reviewing": "interview",
	"interview": "offer",
	"offer":     "hired",
}

// PrintBanner tells a person what runs where, what the demo data is now, and
// what to try next.
func PrintBanner(w io.Writer, st Stack) {
	d := st.Demo
	var b strings.Builder
	fmt.Fprintf(&b, `
jobboard is running.

  API           %[1]s   (OpenAPI: %[1]s/v1/openapi.json)
  Emails (SES)  %[2]s/   <- every email the worker sends shows up here
  SQS           %[3]s   queue %[4]s
                dead letters: %[5]s
  Database      %[6]s

Demo: employer %[7]s and candidate %[8]s, password %[9]q;
company %[10]d, job %[11]d (%[12]s), application %[13]d, now %[14]s`,
		st.APIURL, st.SESEndpoint, st.SQSEndpoint, st.QueueURL, st.DLQURL, st.Database,
		d.EmployerEmail, d.CandidateEmail, d.Password, d.CompanyID, d.JobID, d.JobTitle, d.ApplicationID, d.Status)
	if d.Applications > 1 {
		fmt.Fprintf(&b, " (the candidate has %d applications)", d.Applications)
	}
	b.WriteString(".\n\nTry:\n")
	fmt.Fprintf(&b, "  curl -s '%s/v1/jobs?q=go+engineer'\n", st.APIURL)
	fmt.Fprintf(&b, "  EMPLOYER=$(curl -s -XPOST %s/v1/auth/login -d '{\"email\":\"%s\",\"password\":\"%s\"}' | sed 's/.*\"token\":\"\\([^\"]*\\)\".*/\\1/')\n",
		st.APIURL, d.EmployerEmail, d.Password)
	if next, ok := nextStatus[d.Status]; ok {
		fmt.Fprintf(&b, "  curl -s -XPATCH %s/v1/applications/%d -H \"Authorization: Bearer $EMPLOYER\" -d '{\"status\":\"%s\"}'\n",
			st.APIURL, d.ApplicationID, next)
		fmt.Fprintf(&b, "  curl -s %s/v1/applications/%d/history -H \"Authorization: Bearer $EMPLOYER\"\n", st.APIURL, d.ApplicationID)
		fmt.Fprintf(&b, "  then open %s/ to see the candidate's email.\n", st.SESEndpoint)
	} else {
		fmt.Fprintf(&b, "  curl -s %s/v1/applications/%d/history -H \"Authorization: Bearer $EMPLOYER\"\n", st.APIURL, d.ApplicationID)
		fmt.Fprintf(&b, "  (application %d is %s, which is final: no status change can email the candidate now;\n"+
			"  DEV_DATABASE=<a new name> make dev starts over with a fresh demo.)\n", d.ApplicationID, d.Status)
	}
	state := ""
	if st.StateFile != DefaultStateFile {
		state = " DEV_STATE=" + st.StateFile
	}
	fmt.Fprintf(&b, `
Against this stack, from another terminal:
  make invoke%[1]s FUNCTION=ApiFunction EVENT=events/api-change-status.json   (any sample in events/)
  make poison%[1]s   (a malformed message on the queue, watched until it reaches the dead letters)

Status emails go only to verified addresses (the demo accounts are). A new
account gets a verification email: open %[2]s/, copy the token
from its link (...verify-email?token=...), and post it:
  curl -s -XPOST %[3]s/v1/auth/verify-email -d '{"token":"<token>"}'

Ctrl-C stops everything.
`, state, st.SESEndpoint, st.APIURL)
	_, _ = io.WriteString(w, b.String())
}
