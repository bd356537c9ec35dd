package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// createCompany creates a company with the signed-in employer as its first
// member. POST /v1/companies → 201 company; 401; 403 (not an employer); 422.
func (s *server) createCompany(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	a, err := s.requireRole(r, jobboard.RoleEmployer)
	if err != nil {
		return err
	}
	in, err := decodeValid[jobboard.NewCompany](w, r)
	if err != nil {
		return err
	}
	c, err := st.CreateCompany(r.Context(), a, in)
	if err != nil {
		return fmt.Errorf("create company: %w", err)
	}
	w.Header().Set("Location", "/v1/companies/"+strconv.FormatInt(c.ID, 10))
	return writeJSON(w, http.StatusCreated, c)
}

// company returns a company; companies are public.
// GET /v1/companies/{id} → 200 company; 404.
func (s *server) company(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := noQueryParameters(r); err != nil {
		return err
	}
	_, signedIn := s.optionalActor(r)
	c, err := s.Companies.Company(r.Context(), id)
	if err != nil {
		return fmt.Errorf("company %d: %w", id, err)
	}
	tag, err := companyETag(c)
	if err != nil {
		return err
	}
	return s.writeCacheable(w, r, signedIn, tag, c)
}
