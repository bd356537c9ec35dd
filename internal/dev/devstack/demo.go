package devstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/dev/localaws"
)

// Demo is the seeded data, as it is now: an employer with a company and two
// open jobs, and a candidate who applied to the second. On a fresh database
// the ids are those the sample events in events/ name: employer user 1,
// candidate user 2, company 1; job 1 is open and the candidate has not
// applied to it (events/api-apply.json does), and the application is 1, at
// version 1 (events/api-change-status.json moves it on with If-Match "1",
// the SQS samples are about it).
type Demo struct {
	EmployerEmail  string
	CandidateEmail string
	Password       string
	EmployerToken  string
	CandidateToken string
	CompanyID      int64
	// JobID and ApplicationID are the demo application and its job.
	JobID         int64
	JobTitle      string
	ApplicationID int64
	// Status and Version are the application's status and version now: an
	// earlier run of the stack (or `make invoke`) may have moved it on.
	Status  string
	Version int64
	// Applications is how many applications the candidate has.
	Applications int
}

// The demo accounts. The password is printed in the banner: this is a local
// demo, not a credential.
const (
	demoEmployer  = "employer@demo.jobboard.localhost"
	demoCandidate = "candidate@demo.jobboard.localhost"
	demoPassword  = "demo-password-1"
)

// seedDemo creates the demo through the public API, on a database that does
// not have it yet; on one that does (a second `make dev`), it signs in and
// reads what is there now. The demo application is the candidate's first.
// The demo accounts verify their addresses the way a person would: with the
// link of the verification email the worker sent to the SES stand-in at
// ses.
func seedDemo(ctx context.Context, api, ses string) (Demo, error) {
	d := Demo{EmployerEmail: demoEmployer, CandidateEmail: demoCandidate, Password: demoPassword}
	c := client{&apiclient.Client{BaseURL: api}}
	var err error
	if d.EmployerToken, err = c.signUp(ctx, demoEmployer, "Erin Employer", "employer"); err != nil {
		return d, err
	}
	if d.CandidateToken, err = c.signUp(ctx, demoCandidate, "Cam Candidate", "candidate"); err != nil {
		return d, err
	}
	for _, a := range []struct{ email, token string }{{demoEmployer, d.EmployerToken}, {demoCandidate, d.CandidateToken}} {
		if err := c.verify(ctx, ses, a.email, a.token); err != nil {
			return d, fmt.Errorf("verify %s: %w", a.email, err)
		}
	}
	_, count, err := c.firstApplication(ctx, d.CandidateToken)
	if err != nil {
		return d, err
	}
	if count == 0 {
		if err := c.createDemo(ctx, d); err != nil {
			return d, err
		}
	}
	first, count, err := c.firstApplication(ctx, d.CandidateToken)
	if err != nil {
		return d, err
	}
	if count == 0 {
		return d, errors.New("the demo candidate has no application after seeding")
	}
	d.ApplicationID, d.Applications = first, count
	var app struct {
		JobID   int64  `json:"job_id"`
		Status  string `json:"status"`
		Version int64  `json:"version"`
	}
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/applications/%d", first), d.CandidateToken, nil, http.StatusOK, &app); err != nil {
		return d, err
	}
	var job struct {
		CompanyID int64  `json:"company_id"`
		Title     string `json:"title"`
	}
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/jobs/%d", app.JobID), d.EmployerToken, nil, http.StatusOK, &job); err != nil {
		return d, err
	}
	d.JobID, d.Status, d.Version, d.CompanyID, d.JobTitle = app.JobID, app.Status, app.Version, job.CompanyID, job.Title
	return d, nil
}

// firstApplication returns the id of the candidate's first application (the
// smallest id) and how many they have.
func (c client) firstApplication(ctx context.Context, candidateToken string) (id int64, count int, err error) {
	path := "/v1/me/applications?limit=100"
	for {
		var page struct {
			Items []struct {
				ID int64 `json:"id"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		if err := c.Do(ctx, http.MethodGet, path, candidateToken, nil, http.StatusOK, &page); err != nil {
			return 0, 0, err
		}
		for _, a := range page.Items {
			if count == 0 || a.ID < id {
				id = a.ID
			}
			count++
		}
		if page.NextCursor == "" {
			return id, count, nil
		}
		path = "/v1/me/applications?limit=100&cursor=" + url.QueryEscape(page.NextCursor)
	}
}

// createDemo creates the company, its two jobs and the candidate's
// application to the second, in the order that gives a fresh database the
// ids the sample events name (see Demo).
func (c client) createDemo(ctx context.Context, d Demo) error {
	var company, openJob, demoJob, app created
	if err := c.Do(ctx, http.MethodPost, "/v1/companies", d.EmployerToken, map[string]any{
		"name": "Acme Rockets", "description": "We build rockets.", "website": "https://acme.example",
	}, http.StatusCreated, &company); err != nil {
		return err
	}
	for _, j := range []struct {
		out  *created
		body map[string]any
	}{
		{&openJob, map[string]any{
			"title":           "Backend Engineer (Go)",
			"description":     "Go services on AWS Lambda behind API Gateway, with PostgreSQL.",
			"location":        "Hamburg",
			"remote":          true,
			"employment_type": "full_time",
		}},
		{&demoJob, map[string]any{
			"title":           "Senior Go Engineer",
			"description":     "Build serverless Go services on AWS: Lambda, SQS, SES and PostgreSQL.",
			"location":        "Berlin",
			"remote":          true,
			"employment_type": "full_time",
			"salary":          map[string]any{"min": 80000, "max": 110000, "currency": "EUR"},
		}},
	} {
		if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/companies/%d/jobs", company.ID), d.EmployerToken, j.body, http.StatusCreated, j.out); err != nil {
			return err
		}
	}
	return c.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/jobs/%d/applications", demoJob.ID), d.CandidateToken, map[string]any{
		"cover_letter": "I would love to build this with you.",
	}, http.StatusCreated, &app)
}

// created is the part of a created resource that the demo needs.
type created struct {
	ID int64 `json:"id"`
}

// client is a JSON client of the API, with the demo's requests.
type client struct{ *apiclient.Client }

// signUp signs in to an account, or registers it when it does not exist,
// and returns a token. It signs in first: a registration that finds the
// address taken counts as a failed attempt of the client (see
// docs/security.md), and restarts over the same database would pile them
// up.
func (c client) signUp(ctx context.Context, email, name, role string) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/auth/login", "", map[string]any{
		"email": email, "password": demoPassword,
	}, http.StatusOK, &out)
	if se := (*apiclient.StatusError)(nil); errors.As(err, &se) && se.Got == http.StatusUnauthorized {
		err = c.Do(ctx, http.MethodPost, "/v1/auth/register", "", map[string]any{
			"email": email, "password": demoPassword, "name": name, "role": role,
		}, http.StatusCreated, &out)
	}
	return out.Token, err
}

// verificationToken finds the token of a verification link in an email.
var verificationToken = regexp.MustCompile(`[?&]token=([A-Za-z0-9_-]+)`)

// verifyWait bounds the wait for a verification email.
const verifyWait = 30 * time.Second

// verify follows the verification link sent to email, unless the account
// is verified already. An account from an earlier run, whose email went to
// an earlier SES stand-in, asks for another.
func (c client) verify(ctx context.Context, ses, email, token string) error {
	var me struct {
		EmailVerified bool `json:"email_verified"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/me", token, nil, http.StatusOK, &me); err != nil || me.EmailVerified {
		return err
	}
	var none struct{}
	err := c.Do(ctx, http.MethodPost, "/v1/auth/resend-verification", token, nil, http.StatusAccepted, &none)
	// 429: the registration's email is on its way.
	if se := (*apiclient.StatusError)(nil); err != nil && (!errors.As(err, &se) || se.Got != http.StatusTooManyRequests) {
		return err
	}
	deadline := time.Now().Add(verifyWait)
	for {
		emails, err := localaws.EmailsTo(ctx, ses, email)
		if err != nil {
			return err
		}
		for i := len(emails) - 1; i >= 0; i-- {
			if m := verificationToken.FindStringSubmatch(emails[i].Body.Text); m != nil {
				return c.Do(ctx, http.MethodPost, "/v1/auth/verify-email", "", map[string]string{"token": m[1]}, http.StatusOK, &me)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no verification email to %s within %v", email, verifyWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling interval
		}
	}
}
