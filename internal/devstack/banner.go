package devstack

import (
	"fmt"
	"io"
)

// PrintBanner tells a person what runs where and what to try.
func PrintBanner(w io.Writer, st Stack) {
	d := st.Demo
	fmt.Fprintf(w, `
jobboard is running.

  API           %[1]s   (OpenAPI: %[1]s/v1/openapi.json)
  Emails (SES)  %[2]s/   <- every email the worker sends shows up here
  SQS           %[3]s   queue %[4]s
                dead letters: %[5]s

Demo: employer %[6]s and candidate %[7]s, password %[8]q;
company %[9]d, job %[10]d, application %[11]d (status: submitted).

Try:
  curl -s '%[1]s/v1/jobs?q=go+engineer'
  EMPLOYER=$(curl -s -XPOST %[1]s/v1/auth/login -d '{"email":"%[6]s","password":"%[8]s"}' | sed 's/.*"token":"\([^"]*\)".*/\1/')
  curl -s -XPATCH %[1]s/v1/applications/%[11]d -H "Authorization: Bearer $EMPLOYER" -d '{"status":"reviewing"}'
  curl -s %[1]s/v1/applications/%[11]d/history -H "Authorization: Bearer $EMPLOYER"
  then open %[2]s/ to see the candidate's email.

Status emails go only to verified addresses (the demo accounts are). A new
account gets a verification email: open %[2]s/, copy the token
from its link (...verify-email?token=...), and post it:
  curl -s -XPOST %[1]s/v1/auth/verify-email -d '{"token":"<token>"}'

Ctrl-C stops everything.
`, st.APIURL, st.SESEndpoint, st.SQSEndpoint, st.QueueURL, st.DLQURL,
		d.EmployerEmail, d.CandidateEmail, d.Password, d.CompanyID, d.JobID, d.ApplicationID)
}
