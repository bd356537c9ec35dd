package jobboard_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// The whole workflow table: every (party, from, to) pair is either allowed or
// refused with ErrInvalidTransition, and the allowed set is exactly the
// workflow of the README.
func TestCheckTransition(t *testing.T) {
	type move struct {
		party    jobboard.Party
		from, to jobboard.ApplicationStatus
	}
	allowed := map[move]bool{}
	employerPath := []jobboard.ApplicationStatus{"submitted", "reviewing", "interview", "offer", "hired"}
	for i := 0; i+1 < len(employerPath); i++ {
		allowed[move{jobboard.PartyEmployer, employerPath[i], employerPath[i+1]}] = true
	}
	for _, from := range []jobboard.ApplicationStatus{"submitted", "reviewing", "interview", "offer"} {
		allowed[move{jobboard.PartyEmployer, from, "rejected"}] = true
		allowed[move{jobboard.PartyCandidate, from, "withdrawn"}] = true
	}
	for _, party := range []jobboard.Party{jobboard.PartyCandidate, jobboard.PartyEmployer} {
		for _, from := range jobboard.ApplicationStatuses {
			for _, to := range jobboard.ApplicationStatuses {
				if from == to {
					continue // a no-op, decided before the workflow is asked
				}
				err := jobboard.CheckTransition(party, from, to)
				if want := allowed[move{party, from, to}]; want != (err == nil) {
					t.Errorf("CheckTransition(%v, %s, %s) = %v, want allowed=%v", party, from, to, err, want)
				}
				if err != nil && !errors.Is(err, jobboard.ErrInvalidTransition) {
					t.Errorf("CheckTransition(%v, %s, %s) = %v, want ErrInvalidTransition", party, from, to, err)
				}
			}
		}
	}
}

func TestValidation(t *testing.T) {
	long := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a'
		}
		return string(b)
	}
	tests := []struct {
		name   string
		err    error
		fields []string
	}{
		{"valid registration", jobboard.Registration{Email: "a@b.example", Password: "long enough", Name: "A", Role: "candidate"}.Validate(), nil},
		{"bad registration", jobboard.Registration{Email: "Name <a@b.example>", Password: "short", Role: "admin"}.Validate(),
			[]string{"email", "name", "password", "role"}},
		{"long name", jobboard.Registration{Email: "a@b.example", Password: "long enough", Name: long(201), Role: "employer"}.Validate(),
			[]string{"name"}},
		{"valid job", jobboard.NewJob{Title: "T", Description: "D", EmploymentType: "full_time",
			Salary: &jobboard.Salary{Min: 1, Max: 2, Currency: "EUR"}}.Validate(), nil},
		{"bad job", jobboard.NewJob{Title: long(201), EmploymentType: "gig",
			Salary: &jobboard.Salary{Min: 5, Max: 4, Currency: "eur"}}.Validate(),
			[]string{"description", "employment_type", "salary.currency", "salary.max", "title"}},
		{"company website", jobboard.NewCompany{Name: "Acme", Website: "javascript:alert(1)"}.Validate(), []string{"website"}},
		{"cover letter", jobboard.NewApplication{CoverLetter: long(jobboard.MaxCoverLetterLen + 1)}.Validate(), []string{"cover_letter"}},
	}
	for _, tt := range tests {
		var got []string
		var ve *jobboard.ValidationError
		if errors.As(tt.err, &ve) {
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
		} else if tt.err != nil {
			t.Errorf("%s: error %v is not a *ValidationError", tt.name, tt.err)
		}
		if len(got) != len(tt.fields) {
			t.Errorf("%s: invalid fields = %v, want %v", tt.name, got, tt.fields)
			continue
		}
		for i := range got {
			if got[i] != tt.fields[i] {
				t.Errorf("%s: invalid fields = %v, want %v", tt.name, got, tt.fields)
				break
			}
		}
	}
}

func TestJobPatchValidate(t *testing.T) {
	closed, bad := jobboard.JobClosed, jobboard.JobStatus("paused")
	title, empty, long := "  New  ", "  ", strings.Repeat("x", jobboard.MaxTitleLen+1)
	p := jobboard.JobPatch{Title: &title, Status: &closed, SetSalary: true, Salary: &jobboard.Salary{Min: 1, Max: 2, Currency: " usd "}}
	p.Normalize()
	if err := p.Validate(); err != nil || *p.Title != "New" || p.Salary.Currency != "USD" {
		t.Errorf("normalized patch %+v: %v", p, err)
	}
	// Fields the patch leaves alone are not judged: they keep valid values.
	if err := (jobboard.JobPatch{}).Validate(); err != nil {
		t.Errorf("empty patch: %v", err)
	}
	for _, c := range []struct {
		patch jobboard.JobPatch
		field string
	}{
		{jobboard.JobPatch{Status: &bad}, "status"},
		{jobboard.JobPatch{Title: &empty}, "title"},
		{jobboard.JobPatch{Title: &long}, "title"},
		{jobboard.JobPatch{Description: ptrTo("")}, "description"},
		{jobboard.JobPatch{EmploymentType: ptrTo(jobboard.EmploymentType("gig"))}, "employment_type"},
		{jobboard.JobPatch{SetSalary: true, Salary: &jobboard.Salary{Min: 2, Max: 1, Currency: "EUR"}}, "salary.max"},
	} {
		c.patch.Normalize()
		var ve *jobboard.ValidationError
		if err := c.patch.Validate(); !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != c.field {
			t.Errorf("%+v: %v, want an error on %s", c.patch, err, c.field)
		}
	}
	// Removing the salary is valid.
	if err := (jobboard.JobPatch{SetSalary: true}).Validate(); err != nil {
		t.Errorf("salary removed: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
