package jobboard

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"
)

// Company is an employer organisation. The employer who creates it becomes
// its first member; members manage its jobs and their applications.
type Company struct {
	ID          int64     `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Website     string    `json:"website"`
	CreatedBy   int64     `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
}

// Limits on company input, in characters.
const (
	MaxCompanyNameLen = 200
	MaxWebsiteLen     = 2000
	MaxDescriptionLen = 20000
)

// NewCompany is the input of a company.
type NewCompany struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Website     string `json:"website"`
}

// Normalize trims surrounding white space.
func (c *NewCompany) Normalize() {
	c.Name = strings.TrimSpace(c.Name)
	c.Website = strings.TrimSpace(c.Website)
}

// Validate returns a *ValidationError naming every invalid field.
func (c NewCompany) Validate() error {
	p := problems{}
	requiredText(p, "name", c.Name, MaxCompanyNameLen)
	if utf8.RuneCountInString(c.Description) > MaxDescriptionLen {
		p.add("description", "must be at most %d characters", MaxDescriptionLen)
	}
	if utf8.RuneCountInString(c.Website) > MaxWebsiteLen {
		p.add("website", "must be at most %d characters", MaxWebsiteLen)
	} else if c.Website != "" && !strings.HasPrefix(c.Website, "https://") && !strings.HasPrefix(c.Website, "http://") {
		p.add("website", "must be an http or https URL")
	}
	return p.err()
}

// CompanyStore keeps companies and their members.
type CompanyStore interface {
	// Company returns a company. Errors: ErrNotFound.
	Company(ctx context.Context, id int64) (Company, error)
}

// CompanyWrites are the writes beside CompanyStore's reads that a
// request makes through the Writes it is given (see Writes): in a keyed
// write's transaction, or each committing on its own.
type CompanyWrites interface {
	// CreateCompany stores a company and makes the actor its member, in one
	// transaction. Errors: ErrForbidden when the actor is not an employer,
	// ErrTooManyCompanies when it has created MaxCompaniesPerEmployer.
	CreateCompany(ctx context.Context, actor Actor, c NewCompany) (Company, error)
}

// requiredText checks a required, length-limited text field.
func requiredText(p problems, field, value string, limit int) {
	switch {
	case value == "":
		p.add(field, "is required")
	case utf8.RuneCountInString(value) > limit:
		p.add(field, "must be at most %d characters", limit)
	}
}
