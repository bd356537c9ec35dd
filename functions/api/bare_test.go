package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// barePeer is what the API is measured against (BenchmarkHTTPVsBare): a
// plain net/http handler over a pgx pool that gives the same answers as
// the API for the requests of the benchmark, with the simplest correct SQL
// for each, one statement a request, prepared by the pool (pgx's default
// mode) unless the pool says otherwise. It knows no more than those
// requests: a search by words (first page), an anonymous job read, and a
// member's change of a job's title.
type barePeer struct {
	pool *pgxpool.Pool
	key  []byte // the API's JWT_SECRET
}

func (p *barePeer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs", p.search)
	mux.HandleFunc("GET /v1/jobs/{id}", p.job)
	mux.HandleFunc("PATCH /v1/jobs/{id}", p.updateTitle)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := p.pool.Ping(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	return mux
}

const bareColumns = `id, company_id, title, description, location, remote, employment_type,
	salary_min, salary_max, salary_currency, status, created_at, updated_at`

// bareRow is a row of bareColumns.
type bareRow struct {
	ID, CompanyID                int64
	Title, Description, Location string
	Remote                       bool
	EmploymentType               jobboard.EmploymentType
	SalaryMin, SalaryMax         *int64
	SalaryCurrency               *string
	Status                       jobboard.JobStatus
	CreatedAt, UpdatedAt         time.Time
}

func bareScan(row pgx.CollectableRow) (jobboard.Job, error) {
	r, err := pgx.RowToStructByPos[bareRow](row)
	j := jobboard.Job{ID: r.ID, CompanyID: r.CompanyID, Title: r.Title, Description: r.Description,
		Location: r.Location, Remote: r.Remote, EmploymentType: r.EmploymentType, Status: r.Status,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.SalaryMin != nil {
		j.Salary = &jobboard.Salary{Min: *r.SalaryMin, Max: *r.SalaryMax, Currency: *r.SalaryCurrency}
	}
	return j, err
}

// one answers the job that sql (with args) returns, or 404 when it returns
// none; ok tells that the job was found.
func (p *barePeer) one(w http.ResponseWriter, r *http.Request, sql string, args ...any) (j jobboard.Job, ok bool) {
	rows, _ := p.pool.Query(r.Context(), sql, args...)
	j, err := pgx.CollectExactlyOneRow(rows, bareScan)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		http.NotFound(w, r)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
	return j, err == nil
}

const bareSearchSQL = `SELECT ` + bareColumns + ` FROM jobs
WHERE status = 'open' AND search @@ websearch_to_tsquery('english', $1)
ORDER BY id DESC LIMIT $2`

// search answers GET /v1/jobs?q=words: the first page of open jobs that
// have the words, newest first, with the cursor of the next page.
func (p *barePeer) search(w http.ResponseWriter, r *http.Request) {
	const limit = jobboard.DefaultPageSize
	rows, _ := p.pool.Query(r.Context(), bareSearchSQL, r.URL.Query().Get("q"), limit+1)
	jobs, err := pgx.CollectRows(rows, bareScan)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	page := struct {
		Items      []jobboard.Job `json:"items"`
		NextCursor *string        `json:"next_cursor"`
	}{Items: jobs}
	if len(jobs) > limit {
		page.Items = jobs[:limit]
		c := base64.RawURLEncoding.EncodeToString([]byte("v1:" + strconv.FormatInt(jobs[limit-1].ID, 10)))
		page.NextCursor = &c
	}
	bareWrite(w, page)
}

const bareJobSQL = `SELECT ` + bareColumns + ` FROM jobs WHERE id = $1 AND status = 'open'`

// job answers an anonymous GET /v1/jobs/{id}: the open job, with the
// API's entity tag and caching fields.
func (p *barePeer) job(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "bad id", http.StatusBadRequest)
		return
	}
	j, ok := p.one(w, r, bareJobSQL, id)
	if !ok {
		return
	}
	h := w.Header()
	h.Set("ETag", `"`+strconv.FormatInt(j.UpdatedAt.UnixMicro(), 36)+`"`)
	h.Set("Cache-Control", "public, max-age=30, stale-while-revalidate=30")
	h.Set("Vary", "Authorization")
	bareWrite(w, j)
}

const bareUpdateTitleSQL = `UPDATE jobs j SET title = $3,
	updated_at = greatest(now(), j.updated_at + interval '1 microsecond')
WHERE j.id = $1
  AND EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = $2)
RETURNING ` + bareColumns

// updateTitle answers PATCH /v1/jobs/{id} with {"title": ...} from a
// member of the job's company, signed in with the API's bearer token.
func (p *barePeer) updateTitle(w http.ResponseWriter, r *http.Request) {
	user, err := p.verify(r.Header.Get("Authorization"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "bad id", http.StatusBadRequest)
		return
	}
	var in struct {
		Title string `json:"title"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	title := strings.TrimSpace(in.Title)
	if title == "" || utf8.RuneCountInString(title) > jobboard.MaxTitleLen {
		http.Error(w, "bad title", http.StatusUnprocessableEntity)
		return
	}
	if j, ok := p.one(w, r, bareUpdateTitleSQL, id, user, title); ok {
		bareWrite(w, j)
	}
}

// verify checks an HS256 bearer token of the API and returns its user id.
func (p *barePeer) verify(header string) (int64, error) {
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return 0, errors.New("no bearer token")
	}
	var c jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return p.key, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("jobboard"), jwt.WithAudience("jobboard-api"),
		jwt.WithExpirationRequired())
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(c.Subject, 10, 64)
}

func bareWrite(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

// serveBare serves the bare peer on 127.0.0.1:port over its own pool of
// the database at url until ctx ends.
func serveBare(ctx context.Context, url string, key []byte, port string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: (&barePeer{pool: pool, key: key}).handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
