package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// How SearchJobs chooses its statements, and why.
//
// A search is one round trip, and a text search that did not fill its page
// sometimes a second (searchIndexSQL). Its statements are built from the
// fixed fragments of search_sql.go, so user input only ever travels as a
// parameter, and only the conditions of this search are joined, so the
// planner can match the partial indexes.
//
// Plans. Most searches have no filter besides the words and the cursor.
// Their statements (searchListingSQL, searchWindowSQL, searchIndexSQL) are
// written so that no value of their parameters can change their plan: the
// words are hidden from the planner in a subquery (searchQueryChecked,
// searchQueryIndexed), the page size is part of the text rather than a
// parameter, and each leaves the planner one plan. PostgreSQL's generic
// plan is then the plan it would make for the values, so such a statement
// runs in the pool's mode (fixedPlan, searchFixed): prepared once per
// connection in pgx's default mode, where PostgreSQL soon keeps its
// generic plan and stops planning it, and sent unnamed in the modes that a
// connection proxy needs. Its page goes in one round trip right after
// searchHeaderSQL, which reads the job listing version (the search's
// entity tag is made from it) and whether the words can be searched at
// all; read first, the version is never newer than the page, so a page is
// never older than its tag.
//
// A search with filters (a location, remote, an employment type, a salary,
// a company) needs a plan made for its values: which index reads the
// fewest jobs depends on them (a salary that no job reaches is answered by
// jobs_open_salary_idx, a low one by walking the newest jobs). Its
// statement, searchPageSQL around searchListingSQL or searchWalkSQL, is
// sent unnamed in every mode (searchPlanned), so that it is planned with
// the request's values: a generic plan cannot know how selective the
// filters are.
//
// Text. A text search cannot leave the plan to PostgreSQL alone. The
// planner walks jobs_open_id_idx newest first, checking each job, whenever
// it expects the words to fill a page soon; but it cannot know how common
// a word is that its statistics do not list, nor how rare a phrase or a
// negation makes common words, and for those it walks and checks every
// open job. The two ways to answer cost in opposite directions: a walk
// costs the jobs it reads until the page is full (page size / density),
// the text index costs every match of the words (density × jobs) and a
// sort. So a text search first checks a bounded stretch of the newest
// jobs, the right plan for every word common enough to fill the page
// there, and what it finds there decides the rest: a page still short
// after the stretch means the words are rare, so the text index, which
// reads only their matches, answers the rest (searchRest). Without other
// filters the stretch is a window of the newest ids (searchWindowSQL),
// and a query of many words, none joined by "or", skips it and asks the
// text index at once (searchIndexFirst); with filters it is a number of
// the newest jobs that meet them (searchWalkSQL). searchStretch sizes it.

// SearchJobs returns one page of jobs matching f, newest first, and the
// job listing version (see JobListingVersion) read before the page or in
// its snapshot, so that the page is never older than the version. Only
// open jobs are listed, except that a member of the company named by
// f.CompanyID also sees that company's closed jobs. actor may be nil.
//
// Filters: Query is full-text search over title and description in web
// search syntax (English stemming); it must have a word that is not negated
// (else jobboard.ErrUnsearchable). Location matches the whole location,
// ignoring case and surrounding space; Remote and EmploymentType match exactly;
// SalaryMin keeps jobs whose salary range reaches at least that amount (jobs
// without a salary are left out). The page size is f.Limit clamped to
// 1..MaxPageSize (DefaultPageSize when zero). Pagination is by keyset on id,
// so a page costs the same wherever it is and jobs created while paging do
// not shift the pages. Errors: jobboard.ErrUnsearchable,
// jobboard.ErrTimeout, and database errors.
func (db *DB) SearchJobs(ctx context.Context, actor *jobboard.Actor, f jobboard.JobFilter) (jobboard.JobListing, error) {
	// One row more than the page tells whether another page follows.
	return searchJobs(ctx, db.pool, db.functions, actor, f, chooseStretch(f, pageLimit(f.Limit)+1))
}

// searchConn is what a search sends its statements through: the pool.
type searchConn interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// searchJobs is SearchJobs through conn, with a text search checking
// stretch ids or jobs one by one before it asks the text index (0: none,
// the text index at once; see chooseStretch). With functions, the
// statements that have a function of migration 014 call it (see
// DB.functions).
func searchJobs(ctx context.Context, conn searchConn, functions bool, actor *jobboard.Actor, f jobboard.JobFilter, stretch int) (jobboard.JobListing, error) {
	limit := pageLimit(f.Limit)
	s := planSearch(actor, f, limit+1, stretch)
	var (
		listing    jobboard.JobListing
		found      []jobboard.Job
		searchable bool
		complete   = s.complete
		err        error
	)
	switch {
	case functions && s.function != "":
		found, err = searchFunction(ctx, conn, s, &listing.Version, &searchable)
	case s.fixedPlan:
		found, err = searchFixed(ctx, conn, s, &listing.Version, &searchable)
	default:
		found, err = searchPlanned(ctx, conn, s, &listing.Version, &searchable, &complete)
	}
	if err != nil {
		return jobboard.JobListing{}, fmt.Errorf("search jobs: %w", timeout(ctx, err))
	}
	if s.text && !searchable {
		return jobboard.JobListing{}, fmt.Errorf("search jobs for %q: %w", f.Query, jobboard.ErrUnsearchable)
	}
	if s.text && len(found) < limit+1 && !complete {
		// The stretch did not fill the page: the indexes answer the rest,
		// below the stretch (or below the last job found in it).
		below := s.below
		if len(found) > 0 && (below == nil || found[len(found)-1].ID < *below) {
			below = &found[len(found)-1].ID
		}
		sql, args := searchRest(actor, f, below, limit+1-len(found))
		if !s.fixedPlan { // planned with the values, as the first statement
			args = append([]any{pgx.QueryExecModeExec}, args...)
		}
		rows, _ := conn.Query(ctx, sql, args...)
		rest, err := pgx.CollectRows(rows, scanJob)
		if err != nil {
			return jobboard.JobListing{}, fmt.Errorf("search jobs: %w", timeout(ctx, err))
		}
		found = append(found, rest...)
	}
	listing.Page = pageOf(found, limit, func(j jobboard.Job) int64 { return j.ID })
	return listing, nil
}

// searchFixed runs a search whose page statement has one plan for all
// values (see searchPageSQL) in the pool's mode: searchHeaderSQL, then the
// page, in one round trip. It sets version and searchable from the header.
func searchFixed(ctx context.Context, conn searchConn, s search, version *int64, searchable *bool) ([]jobboard.Job, error) {
	var found []jobboard.Job
	b := &pgx.Batch{}
	b.Queue(s.header, s.headerArgs...).QueryRow(func(row pgx.Row) error {
		return row.Scan(version, searchable)
	})
	b.Queue(s.page, s.args...).Query(func(rows pgx.Rows) error {
		var err error
		found, err = pgx.CollectRows(rows, scanJob)
		return err
	})
	return found, conn.SendBatch(ctx, b).Close()
}

// searchFunction runs a search whose header and page have a function of
// migration 014 (search.function), which answers them as one call. It
// sets version and searchable from the columns beside the page.
func searchFunction(ctx context.Context, conn searchConn, s search, version *int64, searchable *bool) ([]jobboard.Job, error) {
	rows, _ := conn.Query(ctx, s.function, s.functionArgs...)
	return collectListed(rows, version, searchable)
}

// searchPlanned runs a search with filters: searchPageSQL sent unnamed
// (QueryExecModeExec), so that PostgreSQL plans it with this request's
// values every time. A named prepared statement (pgx's default) may be
// moved to a generic plan by the plan cache, and a generic plan cannot
// know how selective the filters are: for a salary that no job reaches it
// walks every open job. It sets version and searchable from the columns
// beside the page, and complete.
func searchPlanned(ctx context.Context, conn searchConn, s search, version *int64, searchable, complete *bool) ([]jobboard.Job, error) {
	rows, _ := conn.Query(ctx, s.page, append([]any{pgx.QueryExecModeExec}, s.args...)...)
	return collectListed(rows, version, searchable, complete)
}

// collectListed reads the rows of a page with columns beside it, read into
// beside (see scanListedJob).
func collectListed(rows pgx.Rows, beside ...any) ([]jobboard.Job, error) {
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*jobboard.Job, error) {
		return scanListedJob(row, beside...)
	})
	found := make([]jobboard.Job, 0, len(jobs))
	for _, j := range jobs {
		if j != nil {
			found = append(found, *j)
		}
	}
	return found, err
}

// scanListedJob reads a row of searchPageSQL or of a search function: the
// columns before the job's into beside (version, searchable, and for
// searchPageSQL complete), and the job, or nil for the row of NULLs of an
// empty page.
func scanListedJob(row pgx.CollectableRow, beside ...any) (*jobboard.Job, error) {
	var (
		id       *int64
		j        jobboard.Job
		lo, hi   *int64
		currency *string
		// The other columns of a row of NULLs.
		companyID                    *int64
		title, description, location *string
		remote                       *bool
		employmentType, status       *string
		createdAt, updatedAt         *time.Time
	)
	err := row.Scan(append(beside, &id, &companyID, &title, &description, &location,
		&remote, &employmentType, &lo, &hi, &currency, &status, &createdAt, &updatedAt)...)
	if err != nil || id == nil {
		return nil, err
	}
	j = jobboard.Job{ID: *id, CompanyID: *companyID, Title: *title, Description: *description,
		Location: *location, Remote: *remote, EmploymentType: jobboard.EmploymentType(*employmentType),
		Status: jobboard.JobStatus(*status), CreatedAt: *createdAt, UpdatedAt: *updatedAt}
	if lo != nil && hi != nil && currency != nil {
		j.Salary = &jobboard.Salary{Min: *lo, Max: *hi, Currency: *currency}
	}
	return &j, nil
}

// search is the first statement of a search and its arguments.
type search struct {
	page string
	args []any
	// text tells a text search, which may need searchRest.
	text bool
	// fixedPlan tells a page statement whose plan no value changes, run
	// after header (with headerArgs) in the pool's mode (searchFixed);
	// otherwise page is searchPageSQL (searchPlanned).
	fixedPlan  bool
	header     string
	headerArgs []any
	// complete tells a page of a fixed plan that is certainly complete (a
	// text search then asks the indexes for no rest), and below the lowest
	// id of the stretch it walked, when known. searchPageSQL tells its own.
	complete bool
	below    *int64
	// function, when not empty, is the call of migration 014's function
	// that answers header and page (with functionArgs), for a pool that
	// sends no named prepared statement (searchFunction).
	function     string
	functionArgs []any
}

// filtered reports whether f has a filter other than the words and the
// cursor.
func filtered(f jobboard.JobFilter) bool {
	return f.CompanyID != nil || strings.TrimSpace(f.Location) != "" || f.Remote != nil ||
		f.EmploymentType != "" || f.SalaryMin != nil
}

// conditions adds the WHERE conditions of f other than the text to b. In
// the rest of a text search (rest true) the cursor and the filters become
// checks of the rows read, never index conditions (see searchIndexSQL).
func conditions(b *searchBuilder, actor *jobboard.Actor, f jobboard.JobFilter, rest bool) {
	add := func(fragment string, args ...any) {
		if rest {
			fragment = "(" + fragment + ") IS TRUE"
		}
		b.add(fragment, args...)
	}
	if f.CompanyID != nil {
		b.add(searchCompany, *f.CompanyID, actorID(actor), sessionOf(actor))
	} else {
		b.add(searchOpen)
	}
	if loc := strings.TrimSpace(f.Location); loc != "" {
		add(searchLocation, loc)
	}
	if f.Remote != nil {
		add(searchRemote, *f.Remote)
	}
	if f.EmploymentType != "" {
		add(searchEmploymentType, string(f.EmploymentType))
	}
	if f.SalaryMin != nil {
		add(searchSalaryMin, *f.SalaryMin)
	}
	if f.After > 0 {
		if rest {
			b.add(searchAfterChecked, f.After)
		} else {
			b.add(searchAfter, f.After)
		}
	}
}

// planSearch returns the first statement of SearchJobs for a page of rows
// rows, with a text search's stretch: without filters searchListingSQL, searchWindowSQL or
// searchIndexSQL, after searchHeaderSQL; with filters searchPageSQL
// around searchListingSQL or searchWalkSQL.
func planSearch(actor *jobboard.Actor, f jobboard.JobFilter, rows, stretch int) search {
	q := strings.TrimSpace(f.Query)
	if filtered(f) {
		return searchWithFilters(actor, f, q, rows, stretch)
	}
	s := search{fixedPlan: true, text: q != "", header: fmt.Sprintf(searchHeaderSQL, "true")}
	if q != "" {
		s.header, s.headerArgs = fmt.Sprintf(searchHeaderSQL, fmt.Sprintf(searchSearchableSQL, 1)), []any{q}
	}
	var b searchBuilder
	var after *int64
	if f.After > 0 {
		after = &f.After
	}
	if q == "" {
		conditions(&b, actor, f, false)
		s.page, s.args = fmt.Sprintf(searchListingSQL, strings.Join(b.where, "\n  AND "), rows), b.args
		s.function, s.functionArgs = searchOpenJobsFunctionSQL, []any{after, rows}
		return s
	}
	if stretch == 0 {
		s.page, s.args = searchRest(actor, f, nil, rows)
		s.complete = true
		return s
	}
	window := stretch
	text := b.fragment(searchQueryChecked, q)
	conditions(&b, actor, f, false)
	var lowest string
	if f.After > 0 {
		// The window's lowest id is known here: the second statement, if
		// any, looks below it, and none is needed when it is the first id.
		low := f.After - int64(window)
		lowest, s.below, s.complete = fmt.Sprintf("$%d", b.param(low)), &low, low <= 1
	} else {
		lowest = fmt.Sprintf("%s - $%d", searchNewestSQL, b.param(window))
	}
	s.page = fmt.Sprintf(searchWindowSQL, strings.Join(append([]string{text}, b.where...), "\n  AND "), lowest, rows)
	s.args = b.args
	s.function, s.functionArgs = searchOpenJobsWindowFunctionSQL, []any{q, after, window, rows}
	return s
}

// searchWithFilters returns searchPageSQL around the page of a search
// with filters: searchListingSQL without words, searchWalkSQL with them.
func searchWithFilters(actor *jobboard.Actor, f jobboard.JobFilter, q string, rows, stretch int) search {
	var b searchBuilder
	if q == "" {
		conditions(&b, actor, f, false)
		listing := fmt.Sprintf(searchListingSQL, strings.Join(b.where, "\n  AND "), rows)
		return search{page: fmt.Sprintf(searchPageSQL, "true", "true", listing, ""), args: b.args}
	}
	text := b.fragment(searchQuery, q)
	conditions(&b, actor, f, false)
	walkParam := b.param(stretch)
	page := fmt.Sprintf(searchWalkPageSQL, text, rows)
	complete := fmt.Sprintf(searchWalkCompleteSQL, walkParam)
	searchable := fmt.Sprintf(searchSearchableSQL, 1) // q is the first parameter
	with := fmt.Sprintf(searchWalkSQL, strings.Join(b.where, "\n  AND "), walkParam)
	return search{page: fmt.Sprintf(searchPageSQL, searchable, complete, page, with), args: b.args, text: true}
}

// searchRest returns searchIndexSQL for the rows rows of a text search
// that come below the id below (nil: no bound) and its arguments.
func searchRest(actor *jobboard.Actor, f jobboard.JobFilter, below *int64, rows int) (string, []any) {
	var b searchBuilder
	text := b.fragment(searchQueryIndexed, strings.TrimSpace(f.Query))
	conditions(&b, actor, f, true)
	where := strings.Join(append(b.where, text), "\n  AND ")
	bound := ""
	if below != nil {
		bound = fmt.Sprintf("\n  AND j.id + 0 < $%d", b.param(*below))
	}
	return fmt.Sprintf(searchIndexSQL, where, bound, rows), b.args
}

// chooseStretch returns the stretch that a text search for f checks one
// by one when it wants rows rows: a window of the newest ids without
// filters, a number of the newest jobs that meet them with filters; 0 when
// it asks the text index at once (searchIndexFirst), and for a search
// without words, which has none.
func chooseStretch(f jobboard.JobFilter, rows int) int {
	q := strings.TrimSpace(f.Query)
	switch {
	case q == "":
		return 0
	case filtered(f):
		return searchStretch(q, searchWalkPerRow, rows)
	case searchIndexFirst(q, rows):
		return 0
	}
	return searchStretch(q, searchWindowPerRow, rows)
}

// searchStretch returns the stretch (searchWindowPerRow or
// searchWalkPerRow ids or jobs per row) that a text search for query
// checks when it wants rows rows. Checking a job costs about one lexeme
// lookup per word, and a query of many words is either rare (an "and" or
// a phrase of them: the text index is its plan) or, joined by "or", common
// enough to fill a page early: beyond two words the stretch shrinks with
// the square of the words, down to 2 × rows jobs.
func searchStretch(query string, perRow, rows int) int {
	words, _, _ := searchWords(query)
	return stretchFor(words, perRow, rows)
}

// stretchFor is searchStretch for a query of words words.
func stretchFor(words, perRow, rows int) int {
	stretch := perRow * rows
	if words > 2 {
		stretch = stretch * 4 / (words * words)
	}
	return max(stretch, 2*rows)
}

// searchIndexFirst reports whether a text search for query without
// filters asks the text index at once, in its first statement, rather
// than after a window of the newest ids. So it does when the query has so
// many different words (17 or 18, by the page size) that the window would
// be at its least, 2 × rows ids, and none is joined by "or": such a window
// fills the page only if half the newest jobs have every word, so it all
// but always costs a statement and a round trip of its own before the
// text index answers anyway. What the index then reads is what the rest
// of the search would have read: the matches of the words. Words repeated count once, so that a common word
// said many times keeps its window.
func searchIndexFirst(query string, rows int) bool {
	_, distinct, or := searchWords(query)
	return !or && stretchFor(distinct, searchWindowPerRow, rows) <= 2*rows
}

// searchWords counts the words of query (runs of letters and digits, "or"
// left out), all of them and the different ones ignoring case, and tells
// whether "or" is one of them.
func searchWords(query string) (words, distinct int, or bool) {
	seen := make(map[string]bool)
	for _, w := range strings.FieldsFunc(query, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		w = strings.ToLower(w)
		if w == "or" {
			or = true
			continue
		}
		words++
		seen[w] = true
	}
	return words, len(seen), or
}

// searchBuilder collects fixed WHERE fragments and their parameters.
type searchBuilder struct {
	where []string
	args  []any
}

// fragment returns fragment with its %[1]d, %[2]d... replaced by the
// positions that args will have, and appends args.
func (b *searchBuilder) fragment(fragment string, args ...any) string {
	positions := make([]any, len(args))
	for i := range args {
		positions[i] = len(b.args) + i + 1
	}
	if len(positions) > 0 {
		fragment = fmt.Sprintf(fragment, positions...)
	}
	b.args = append(b.args, args...)
	return fragment
}

// add appends a condition whose %[1]d, %[2]d... stand for the given args.
func (b *searchBuilder) add(fragment string, args ...any) {
	b.where = append(b.where, b.fragment(fragment, args...))
}

// param appends one more parameter and returns its position.
func (b *searchBuilder) param(arg any) int {
	b.args = append(b.args, arg)
	return len(b.args)
}
