package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// apply submits the signed-in candidate's application to an open job.
// POST /v1/jobs/{id}/applications → 201 application; 401; 403 (not a
// candidate); 404; 409 duplicate-application or job-closed; 422.
func (s *server) apply(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	a, err := s.requireRole(r, jobboard.RoleCandidate)
	if err != nil {
		return err
	}
	jobID, err := pathID(r, "id")
	if err != nil {
		return err
	}
	in, err := decodeValid[jobboard.NewApplication](w, r)
	if err != nil {
		return err
	}
	app, err := st.Apply(r.Context(), a, jobID, in)
	if err != nil {
		return fmt.Errorf("apply to job %d: %w", jobID, err)
	}
	w.Header().Set("Location", "/v1/applications/"+strconv.FormatInt(app.ID, 10))
	return writeApplication(w, http.StatusCreated, app)
}

// jobApplications lists a job's applications to a member of its company.
// GET /v1/jobs/{id}/applications?limit&cursor → 200 page; 401; 404.
func (s *server) jobApplications(w http.ResponseWriter, r *http.Request) error {
	a, err := s.actor(r)
	if err != nil {
		return err
	}
	jobID, err := pathID(r, "id")
	if err != nil {
		return err
	}
	q := newQuery(r, "limit", "cursor")
	limit, after := q.limit(), q.cursor()
	if err := q.done(); err != nil {
		return err
	}
	p, err := s.Applications.JobApplications(r.Context(), a, jobID, limit, after)
	if err != nil {
		return fmt.Errorf("applications of job %d: %w", jobID, err)
	}
	return writeJSON(w, http.StatusOK, newPage(p))
}

// myApplications lists the signed-in candidate's applications.
// GET /v1/me/applications?limit&cursor → 200 page; 401; 403 (not a candidate).
func (s *server) myApplications(w http.ResponseWriter, r *http.Request) error {
	a, err := s.requireRole(r, jobboard.RoleCandidate)
	if err != nil {
		return err
	}
	q := newQuery(r, "limit", "cursor")
	limit, after := q.limit(), q.cursor()
	if err := q.done(); err != nil {
		return err
	}
	p, err := s.Applications.CandidateApplications(r.Context(), a, limit, after)
	if err != nil {
		return fmt.Errorf("applications of candidate %d: %w", a.UserID, err)
	}
	return writeJSON(w, http.StatusOK, newPage(p))
}

// application returns one application, with its version as the ETag, to
// its candidate or a member of the job's company.
// GET /v1/applications/{id} → 200 application; 401; 404.
func (s *server) application(w http.ResponseWriter, r *http.Request) error {
	a, err := s.actor(r)
	if err != nil {
		return err
	}
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	app, err := s.Applications.Application(r.Context(), a, id)
	if err != nil {
		return fmt.Errorf("application %d: %w", id, err)
	}
	return writeApplication(w, http.StatusOK, app)
}

// statusChange is the body of PATCH /v1/applications/{id}.
type statusChange struct {
	Status jobboard.ApplicationStatus `json:"status"`
}

// changeStatus moves an application along the workflow: a member of the
// job's company moves it forward or rejects it, the candidate withdraws it.
// An If-Match with the ETag of a GET makes the change conditional. Setting
// the current status again answers 200 and emits nothing.
// PATCH /v1/applications/{id} → 200 application; 400 (malformed If-Match);
// 401; 404; 409 invalid-transition; 412; 422.
func (s *server) changeStatus(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	a, err := s.actor(r)
	if err != nil {
		return err
	}
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	cond, err := parseIfMatch(r.Header)
	if err != nil {
		return err
	}
	var in statusChange
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	switch {
	case in.Status == "":
		return &jobboard.ValidationError{Fields: []jobboard.FieldError{{Field: "status", Detail: "is required"}}}
	case !in.Status.Valid():
		return &jobboard.ValidationError{Fields: []jobboard.FieldError{{Field: "status", Detail: fmt.Sprintf("must be one of %v", jobboard.ApplicationStatuses)}}}
	}
	change := jobboard.StatusChange{Status: in.Status}
	if change.IfVersion, err = s.ifVersion(r.Context(), a, id, cond); err != nil {
		return err
	}
	app, err := st.ChangeStatus(r.Context(), a, id, change)
	if err != nil {
		return fmt.Errorf("change status of application %d to %s: %w", id, in.Status, err)
	}
	return writeApplication(w, http.StatusOK, app)
}

// history lists an application's status changes, oldest first.
// GET /v1/applications/{id}/history → 200 {items}; 401; 404.
func (s *server) history(w http.ResponseWriter, r *http.Request) error {
	a, err := s.actor(r)
	if err != nil {
		return err
	}
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	h, err := s.Applications.History(r.Context(), a, id)
	if err != nil {
		return fmt.Errorf("history of application %d: %w", id, err)
	}
	if h == nil {
		h = []jobboard.HistoryEntry{}
	}
	return writeJSON(w, http.StatusOK, struct {
		Items []jobboard.HistoryEntry `json:"items"`
	}{h})
}

func writeApplication(w http.ResponseWriter, status int, app jobboard.Application) error {
	w.Header().Set("ETag", etag(app.Version))
	return writeJSON(w, status, app)
}

// etag is the strong entity tag of an application version: "3".
func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// precondition is a parsed If-Match header.
type precondition struct {
	present  bool
	any      bool    // If-Match: *
	versions []int64 // versions named by strong tags of ours
}

// parseIfMatch reads If-Match (RFC 9110 §13.1.1). Weak tags and tags that
// are not ours can never match under strong comparison, so they are kept out
// of versions (a header of only such tags answers 412). Errors: *requestError
// when the header is not a valid list of entity tags.
func parseIfMatch(h http.Header) (precondition, error) {
	lines := h.Values("If-Match")
	if len(lines) == 0 {
		return precondition{}, nil
	}
	c := precondition{present: true}
	rest := strings.TrimSpace(strings.Join(lines, ","))
	if p := headerProblem(rest); p != "" {
		return c, badRequest("If-Match", p)
	}
	if rest == "*" {
		c.any = true
		return c, nil
	}
	malformed := badRequest("If-Match", `must be "*" or a list of entity tags such as "3"`)
	for {
		rest = strings.TrimLeft(rest, " \t,")
		if rest == "" {
			break
		}
		weak := strings.HasPrefix(rest, "W/")
		if weak {
			rest = rest[2:]
		}
		if !strings.HasPrefix(rest, `"`) {
			return c, malformed
		}
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return c, malformed
		}
		opaque := rest[1 : 1+end]
		rest = rest[2+end:]
		if next := strings.TrimLeft(rest, " \t"); next != "" && next[0] != ',' {
			return c, malformed
		}
		if v, ok := parseID(opaque); ok && !weak {
			c.versions = append(c.versions, v)
		}
	}
	return c, nil
}

// ifVersion turns a precondition into the version the store must find.
// With several candidate versions, the current one is read: if it is among
// them, the change is conditional on it (so a change in between still
// fails). Errors: jobboard.ErrPreconditionFailed, and the store's errors.
func (s *server) ifVersion(ctx context.Context, a jobboard.Actor, id int64, c precondition) (*int64, error) {
	switch {
	case !c.present || c.any:
		return nil, nil
	case len(c.versions) == 0:
		return nil, fmt.Errorf("application %d: no usable entity tag: %w", id, jobboard.ErrPreconditionFailed)
	case len(c.versions) == 1:
		return &c.versions[0], nil
	}
	current, err := s.Applications.Application(ctx, a, id)
	if err != nil {
		return nil, fmt.Errorf("application %d: %w", id, err)
	}
	if !slices.Contains(c.versions, current.Version) {
		return nil, fmt.Errorf("application %d is at version %d: %w", id, current.Version, jobboard.ErrPreconditionFailed)
	}
	return &current.Version, nil
}
