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

// PrintBanner tells a person what runs where (and as which process), where
// the logs are, what the demo data is now, and what to try next.
func PrintBanner(w io.Writer, st Stack) {
	d := st.Demo
	var b strings.Builder
	fmt.Fprintf(&b, `
jobboard is running as PID %[1]d (Ctrl-C here, or kill %[1]d, stops everything).

  API           %[2]s   (OpenAPI: %[2]s/v1/openapi.json)
  Emails (SES)  %[3]s/   <- every email the worker sends; as JSON: %[3]s/store
  SQS           %[4]s   queue %[5]s
                dead letters: %[6]s
  Database      %[7]s
`, st.PID, st.APIURL, st.SESEndpoint, st.SQSEndpoint, st.QueueURL, st.DLQURL, st.Database)
	if st.LogFile != "" {
		fmt.Fprintf(&b, "  Logs          %[1]s   (tail -f %[1]s)\n", st.LogFile)
	}
	fmt.Fprintf(&b, `
Demo: employer %s and candidate %s, password %q;
company %d, job %d (%s), application %d, now %s (version %d)`,
		d.EmployerEmail, d.CandidateEmail, d.Password, d.CompanyID, d.JobID, d.JobTitle, d.ApplicationID, d.Status, d.Version)
	if d.Applications > 1 {
		fmt.Fprintf(&b, "; the candidate has %d applications", d.Applications)
	}
	b.WriteString(".\n\nTry:\n")
	fmt.Fprintf(&b, "  curl -s '%s/v1/jobs?q=go+engineer'\n", st.APIURL)
	fmt.Fprintf(&b, "  EMPLOYER=$(curl -s -XPOST %s/v1/auth/login -d '{\"email\":\"%s\",\"password\":\"%s\"}' | jq -r .token)\n",
		st.APIURL, d.EmployerEmail, d.Password)
	if next, ok := nextStatus[d.Status]; ok {
		fmt.Fprintf(&b, "  curl -s -XPATCH %s/v1/applications/%d -H \"Authorization: Bearer $EMPLOYER\" -H 'If-Match: \"%d\"' -d '{\"status\":\"%s\"}'\n",
			st.APIURL, d.ApplicationID, d.Version, next)
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
The whole flow with accounts of your own (register, verify, post a job, apply,
move the application on, see the email): README.md, "First ten minutes".

Against this stack, from another terminal (what each sample does, on a first
and a second run: docs/development.md, "Sample events"):
  make invoke%[1]s FUNCTION=ApiFunction EVENT=events/api-change-status.json
  make poison%[1]s   (a malformed message on the queue, watched until it reaches the dead letters)
`, state)
	_, _ = io.WriteString(w, b.String())
}
