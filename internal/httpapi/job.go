package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// maxQueryLen bounds the free-text search query, in characters.
const maxQueryLen = 200

// createJob posts a job for a company the actor is a member of.
// POST /v1/companies/{id}/jobs → 201 job; 401; 404 (no such company, or not
// a member); 422.
func (s *server) createJob(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	a, err := s.actor(r)
	if err != nil {
		return err
	}
	companyID, err := pathID(r, "id")
	if err != nil {
		return err
	}
	in, err := decodeValid[jobboard.NewJob](w, r)
	if err != nil {
		return err
	}
	j, err := st.CreateJob(r.Context(), a, companyID, in)
	if err != nil {
		return fmt.Errorf("create job for company %d: %w", companyID, err)
	}
	w.Header().Set("Location", "/v1/jobs/"+strconv.FormatInt(j.ID, 10))
	return writeJSON(w, http.StatusCreated, j)
}

// job returns an open job, or a closed one to a member of its company.
// GET /v1/jobs/{id} → 200 job with ETag; 304 (If-None-Match); 400 for any
// query parameter; 404.
func (s *server) job(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := noQueryParameters(r); err != nil {
		return err
	}
	a, signedIn := s.optionalActor(r)
	var actor *jobboard.Actor
	if signedIn {
		actor = &a
	}
	j, err := s.Jobs.Job(r.Context(), actor, id)
	if err != nil {
		return fmt.Errorf("job %d: %w", id, err)
	}
	return s.writeCacheable(w, r, signedIn, jobETag(j), j)
}

// searchJobs lists open jobs, newest first, one keyset page at a time,
// with an entity tag made of the listing version the page was read at.
// GET /v1/jobs?q&location&remote&employment_type&salary_min&company_id&limit&cursor
// → 200 page of jobs; 304 (If-None-Match); 400 for a bad parameter or
// cursor, or a q of only negated words; 503 when the search runs past the
// statement timeout.
func (s *server) searchJobs(w http.ResponseWriter, r *http.Request) error {
	a, signedIn := s.optionalActor(r)
	var actor *jobboard.Actor
	if signedIn {
		actor = &a
	}
	// The parameters are checked first: a bad search answers 400 whatever
	// If-None-Match says (even "*").
	f, err := jobFilter(r)
	if err != nil {
		return err
	}
	if done, err := s.listingNotModified(w, r, actor); done || err != nil {
		return err
	}
	listing, err := s.Jobs.SearchJobs(r.Context(), actor, f)
	if err != nil {
		return fmt.Errorf("search jobs: %w", err)
	}
	s.cacheHeaders(w.Header(), signedIn, listingETag(listing.Version, r.URL.RawQuery, actor))
	return writeJSON(w, http.StatusOK, newPage(listing.Page))
}

// jobFilter reads the query parameters of a job search. Errors:
// *requestError naming every bad parameter.
func jobFilter(r *http.Request) (jobboard.JobFilter, error) {
	q := newQuery(r, "q", "location", "remote", "employment_type", "salary_min", "company_id", "limit", "cursor")
	f := jobboard.JobFilter{
		Query:     q.text("q", maxQueryLen),
		Location:  q.text("location", jobboard.MaxLocationLen),
		Remote:    q.boolean("remote"),
		SalaryMin: q.integer("salary_min", 0, jobboard.MaxSalary),
		CompanyID: q.id("company_id"),
		Limit:     q.limit(),
		After:     q.cursor(),
	}
	if v, ok := q.get("employment_type"); ok {
		f.EmploymentType = jobboard.EmploymentType(v)
		if !f.EmploymentType.Valid() {
			q.fail("employment_type", fmt.Sprintf("must be one of %v", jobboard.EmploymentTypes))
		}
	}
	return f, q.done()
}

// updateJob changes a job with JSON merge-patch semantics (RFC 7396):
// members left out stay as they are; null removes an optional member
// (salary, location) and empties a required one, which then fails
// validation. A partial salary object is merged into the current salary.
// Closing a job is {"status":"closed"}.
// PATCH /v1/jobs/{id} → 200 job; 400; 401; 404; 422.
func (s *server) updateJob(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	a, err := s.actor(r)
	if err != nil {
		return err
	}
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	patch, partialSalary, err := parseJobPatch(body)
	if err != nil {
		return err
	}
	if partialSalary != nil {
		// Merge the given salary members into the current salary. The read
		// and the update are separate: a concurrent salary change between
		// them is overwritten, which is what a full replacement would do too.
		current, err := s.Jobs.Job(r.Context(), &a, id)
		if err != nil {
			return fmt.Errorf("job %d: %w", id, err)
		}
		salary, err := partialSalary.mergeInto(current.Salary)
		if err != nil {
			return err
		}
		patch.SetSalary, patch.Salary = true, salary
	}
	j, err := st.UpdateJob(r.Context(), a, id, patch)
	if err != nil {
		return fmt.Errorf("update job %d: %w", id, err)
	}
	return writeJSON(w, http.StatusOK, j)
}

// salaryPatch is a salary object in a merge patch; nil members are absent.
type salaryPatch struct {
	Min, Max *int64
	Currency *string
}

// mergeInto returns the salary with the patch applied over current (which
// may be nil). Errors: *jobboard.ValidationError when a member is missing
// and there is no current salary to take it from.
func (p salaryPatch) mergeInto(current *jobboard.Salary) (*jobboard.Salary, error) {
	var out jobboard.Salary
	if current != nil {
		out = *current
	}
	var missing []jobboard.FieldError
	if p.Min != nil {
		out.Min = *p.Min
	} else if current == nil {
		missing = append(missing, jobboard.FieldError{Field: "salary.min", Detail: "is required when the job has no salary yet"})
	}
	if p.Max != nil {
		out.Max = *p.Max
	} else if current == nil {
		missing = append(missing, jobboard.FieldError{Field: "salary.max", Detail: "is required when the job has no salary yet"})
	}
	if p.Currency != nil {
		out.Currency = *p.Currency
	} else if current == nil {
		missing = append(missing, jobboard.FieldError{Field: "salary.currency", Detail: "is required when the job has no salary yet"})
	}
	if missing != nil {
		sort.Slice(missing, func(i, j int) bool { return missing[i].Field < missing[j].Field })
		return nil, &jobboard.ValidationError{Fields: missing}
	}
	return &out, nil
}

// jobPatchMembers are the members a job's merge patch may have.
var jobPatchMembers = members{
	"title": nil, "description": nil, "location": nil, "remote": nil, "employment_type": nil, "status": nil,
	"salary": {"min": nil, "max": nil, "currency": nil},
}

// parseJobPatch reads a merge-patch document into a JobPatch. A salary
// object with fewer than all three members comes back separately, to be
// merged with the current salary. Errors: *requestError for malformed JSON,
// unknown or repeated members, bad text (see checkBody) or wrong JSON types,
// *jobboard.ValidationError for null salary members.
func parseJobPatch(body []byte) (jobboard.JobPatch, *salaryPatch, error) {
	var (
		p       jobboard.JobPatch
		members map[string]json.RawMessage
	)
	if err := checkBody(body, jobPatchMembers); err != nil {
		return p, nil, err
	}
	if err := json.Unmarshal(body, &members); err != nil {
		return p, nil, jsonError(err)
	}
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	sort.Strings(names) // report the same first error for the same input
	var partial *salaryPatch
	for _, name := range names {
		raw := members[name]
		null := bytes.Equal(raw, []byte("null"))
		var err error
		switch name {
		case "title":
			p.Title, err = stringMember(name, raw, null)
		case "description":
			p.Description, err = stringMember(name, raw, null)
		case "location":
			p.Location, err = stringMember(name, raw, null)
		case "remote":
			var b bool
			if !null {
				err = memberInto(name, raw, &b)
			}
			p.Remote = &b
		case "employment_type":
			var t *string
			t, err = stringMember(name, raw, null)
			if t != nil {
				et := jobboard.EmploymentType(*t)
				p.EmploymentType = &et
			}
		case "status":
			var st *string
			st, err = stringMember(name, raw, null)
			if st != nil {
				js := jobboard.JobStatus(*st)
				p.Status = &js
			}
		case "salary":
			if null {
				p.SetSalary, p.Salary = true, nil
				continue
			}
			var sp *salaryPatch
			sp, err = parseSalaryPatch(raw)
			if err != nil {
				break
			}
			if sp.Min != nil && sp.Max != nil && sp.Currency != nil {
				p.SetSalary = true
				p.Salary = &jobboard.Salary{Min: *sp.Min, Max: *sp.Max, Currency: *sp.Currency}
			} else {
				partial = sp
			}
		default:
			err = badRequest(name, "is not a known field")
		}
		if err != nil {
			return p, nil, err
		}
	}
	return p, partial, nil
}

// stringMember decodes a string member; null means the empty string.
func stringMember(name string, raw json.RawMessage, null bool) (*string, error) {
	var v string
	if !null {
		if err := memberInto(name, raw, &v); err != nil {
			return nil, err
		}
	}
	return &v, nil
}

func memberInto(name string, raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		e := jsonError(err)
		if len(e.fields) > 0 {
			e.fields[0].Field = name
		} else {
			e.fields = []jobboard.FieldError{{Field: name, Detail: "has the wrong JSON type"}}
		}
		return e
	}
	return nil
}

func parseSalaryPatch(raw json.RawMessage) (*salaryPatch, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, badRequest("salary", "must be an object or null")
	}
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	sort.Strings(names)
	var sp salaryPatch
	var nulls []jobboard.FieldError
	for _, name := range names {
		v := members[name]
		field := "salary." + name
		if bytes.Equal(v, []byte("null")) {
			if name == "min" || name == "max" || name == "currency" {
				nulls = append(nulls, jobboard.FieldError{Field: field, Detail: "cannot be removed; remove the whole salary with \"salary\": null"})
				continue
			}
		}
		var err error
		switch name {
		case "min":
			sp.Min = new(int64)
			err = memberInto(field, v, sp.Min)
		case "max":
			sp.Max = new(int64)
			err = memberInto(field, v, sp.Max)
		case "currency":
			sp.Currency = new(string)
			err = memberInto(field, v, sp.Currency)
		default:
			err = badRequest(field, "is not a known field")
		}
		if err != nil {
			return nil, err
		}
	}
	if nulls != nil {
		return nil, &jobboard.ValidationError{Fields: nulls}
	}
	return &sp, nil
}
