package jobboard

import (
	"context"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"
)

// Role is what a user is on the board.
type Role string

// The roles a user can have.
const (
	RoleCandidate Role = "candidate"
	RoleEmployer  Role = "employer"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleCandidate || r == RoleEmployer }

// User is a registered account. The password hash never leaves the store.
type User struct {
	ID        int64     `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// Actor is the signed-in user on whose behalf a store method runs. The stores
// use it to decide what the caller may see and change.
type Actor struct {
	UserID int64
	Role   Role
}

// Limits on user input, in characters.
const (
	MaxEmailLen    = 254
	MaxNameLen     = 200
	MinPasswordLen = 8
	MaxPasswordLen = 128
)

// Registration is the input of a new account.
type Registration struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
	Role     Role   `json:"role"`
}

// Normalize trims the name and lower-cases the email, so that the same
// address cannot register twice in different cases.
func (r *Registration) Normalize() {
	r.Email = strings.ToLower(strings.TrimSpace(r.Email))
	r.Name = strings.TrimSpace(r.Name)
}

// Validate returns a *ValidationError naming every invalid field.
func (r Registration) Validate() error {
	p := problems{}
	if r.Email == "" {
		p.add("email", "is required")
	} else if utf8.RuneCountInString(r.Email) > MaxEmailLen {
		p.add("email", "must be at most %d characters", MaxEmailLen)
	} else if a, err := mail.ParseAddress(r.Email); err != nil || a.Address != r.Email {
		p.add("email", "must be a plain email address")
	}
	if n := utf8.RuneCountInString(r.Password); n < MinPasswordLen || n > MaxPasswordLen {
		p.add("password", "must be %d to %d characters", MinPasswordLen, MaxPasswordLen)
	}
	if r.Name == "" {
		p.add("name", "is required")
	} else if utf8.RuneCountInString(r.Name) > MaxNameLen {
		p.add("name", "must be at most %d characters", MaxNameLen)
	}
	if !r.Role.Valid() {
		p.add("role", "must be %q or %q", RoleCandidate, RoleEmployer)
	}
	return p.err()
}

// Credentials is the input of a login.
type Credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// UserStore keeps accounts.
type UserStore interface {
	// CreateUser stores a new user with the given password hash.
	// Errors: ErrEmailTaken.
	CreateUser(ctx context.Context, r Registration, passwordHash string) (User, error)
	// UserByEmail returns a user and its password hash. Errors: ErrNotFound.
	UserByEmail(ctx context.Context, email string) (User, string, error)
	// UserByID returns a user. Errors: ErrNotFound.
	UserByID(ctx context.Context, id int64) (User, error)
}
