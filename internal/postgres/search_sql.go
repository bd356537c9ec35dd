package postgres

// The SQL of SearchJobs: fixed fragments and statements, which search.go
// chooses and joins by the rule stated there.

// The fragments SearchJobs assembles its WHERE clause from. Each is fixed
// text; %[1]d and %[2]d become the positions of its own parameters, so user
// input only ever travels as a parameter. Only the fragments in use are
// joined, so the planner sees exactly the conditions of this search, with
// status = 'open' literally, and can match the partial indexes:
// jobs_open_id_idx newest first for listings, jobs_open_location_idx and
// jobs_open_facets_idx for locations, jobs_open_salary_idx for a salary no
// job reaches, jobs_search_idx for text.
const (
	searchOpen = `j.status = 'open'`
	// searchQuery also refuses, inside the statement, a query that the
	// index cannot answer (querytree gives 'T' for one of only negated
	// words): the planner folds that condition to false and reads nothing,
	// where the query alone would be checked against every open job.
	searchQuery = `j.search @@ websearch_to_tsquery('english', $%[1]d)
  AND querytree(websearch_to_tsquery('english', $%[1]d)) <> 'T'`
	// searchQueryChecked is the text condition of searchWindowSQL: a check
	// of each job read, which no index can answer (IS TRUE is not an
	// indexable form), with the query hidden from the planner. It does not
	// refuse a query of only negated words (searchSearchableSQL does, in
	// searchHeaderSQL): the window bounds what such a query reads.
	searchQueryChecked = `(j.search @@ (SELECT websearch_to_tsquery('english', $%[1]d))) IS TRUE`
	// searchQueryIndexed is searchQuery for the text index alone: the
	// query hidden from the planner, so that it cannot judge the words
	// common enough to walk every open job instead (see searchIndexSQL).
	searchQueryIndexed = `j.search @@ (SELECT websearch_to_tsquery('english', $%[1]d))
  AND querytree(websearch_to_tsquery('english', $%[1]d)) <> 'T'`
	// searchLocation is an exact match on the normalised location, which
	// jobs_open_location_idx answers in id order whether or not anything
	// matches.
	searchLocation       = `lower(j.location) = lower($%[1]d)`
	searchRemote         = `j.remote = $%[1]d`
	searchEmploymentType = `j.employment_type = $%[1]d`
	searchSalaryMin      = `j.salary_max >= $%[1]d`
	searchAfter          = `j.id < $%[1]d`
	// searchAfterChecked is the cursor as a check of each job read rather
	// than an index condition: jobs_search_idx holds the id too (btree_gin),
	// and the planner, which underrates that part of a GIN index, would
	// otherwise read there every id below the cursor, one index entry at a
	// time, which costs far more than the matches of the words.
	searchAfterChecked = `j.id + 0 < $%[1]d`
)

// searchCompany keeps one company's jobs: open ones, and closed ones too
// when the actor is a member with a live session (an uncorrelated EXISTS,
// evaluated once); one whose session has ended sees what anyone sees.
var searchCompany = `j.company_id = $%[1]d AND (j.status = 'open' OR EXISTS (
		SELECT 1 FROM company_members m WHERE m.company_id = $%[1]d AND m.user_id = $%[2]d)
	AND ` + liveSession("$%[2]d", "$%[3]d") + `)`

// searchPageSQL answers the page (%[3]s) and, beside it in the same
// snapshot, the job listing version, whether the query can be searched at
// all (%[1]s; only when the page is empty does it matter) and whether the
// page is certainly complete (%[2]s). An empty page is one row of NULLs
// beside those columns. %[4]s is a WITH clause, for searchWalkSQL.
const searchPageSQL = `%[4]s
SELECT v.version, %[1]s AS searchable, %[2]s AS complete, ` + jobColumns + `
FROM job_listing_version v
LEFT JOIN LATERAL (%[3]s) j ON true
ORDER BY j.id DESC`

// searchHeaderSQL is the job listing version and whether the query can be
// searched at all (%s: searchSearchableSQL, or true for a search without
// words), read just before a page of a search without filters. The second
// is a subquery so that a plan for the values cannot fold it to a constant
// and look cheaper than the generic plan (which PostgreSQL would then never
// keep).
const searchHeaderSQL = `SELECT version, (SELECT %s) FROM job_listing_version`

// searchListingSQL is the page of a search without text: the planner's own
// plan, which every filter's index keeps bounded. Without filters that is
// the walk of jobs_open_id_idx, whatever the cursor.
const searchListingSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %s
ORDER BY j.id DESC
LIMIT %d`

// searchWindowSQL is the stretch of a text search without filters, and
// its page: the planner's own walk of jobs_open_id_idx with the text
// checked inside the scan (searchQueryChecked), stopped at the window's
// lowest id (%[2]s: below the cursor, or below searchNewestSQL). The text
// condition is in a form no index answers, so that the window's id range
// cannot be read in jobs_search_idx instead (see searchAfterChecked).
//
// searchWalkSQL is the stretch of a text search with filters: the newest
// jobs that meet them, a WITH query with its own LIMIT, which no condition
// is pushed into, so the walk stops there whatever the words.
// searchWalkCompleteSQL counts them, so that a stretch that holds every
// job meeting the filters (a location no job has, all filters combined)
// makes a page known to be complete without a second statement.
const (
	searchWindowSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %[1]s AND j.id >= %[2]s
ORDER BY j.id DESC
LIMIT %[3]d`
	// searchNewestSQL is one more than the newest id, the top of the
	// first page's window: the last value of the jobs' id sequence, which
	// is not a read of jobs, so it costs the planner nothing (max(id) would
	// make it plan a second scan of jobs). An id the sequence gave to a
	// job not committed, or since deleted, only leaves the window fewer
	// jobs.
	searchNewestSQL = `(SELECT last_value + 1 FROM jobs_id_seq)`
	// searchWalkSQL is the stretch (a WITH clause, so that it is read once)
	// and the page from it; searchWalkCompleteSQL tells whether fewer jobs
	// than the stretch meet the filters, so that the walk read them all.
	searchWalkSQL = `
WITH walk AS MATERIALIZED (SELECT * FROM jobs j WHERE %[1]s ORDER BY j.id DESC LIMIT $%[2]d)`
	searchWalkPageSQL = `
SELECT ` + jobColumns + `
FROM walk j
WHERE %[1]s
ORDER BY j.id DESC
LIMIT %[2]d`
	searchWalkCompleteSQL = `(SELECT count(*) < $%d FROM walk)`
	// searchSearchableSQL tells whether the text index can answer the
	// query at all.
	searchSearchableSQL = `querytree(websearch_to_tsquery('english', $%d)) <> 'T'`
)

// searchOpenJobsFunctionSQL and searchOpenJobsWindowFunctionSQL are
// searchHeaderSQL followed by searchListingSQL or searchWindowSQL, for a
// search without filters, as the functions of migration 014 (see
// DB.functions): $1 the words (the window only), then the cursor (NULL
// for the first page), the window and the rows of the page.
const (
	searchOpenJobsFunctionSQL       = `SELECT * FROM search_open_jobs($1, $2)`
	searchOpenJobsWindowFunctionSQL = `SELECT * FROM search_open_jobs_window($1, $2, $3, $4)`
)

// searchIndexSQL answers the rest of a text search through the text
// index: the jobs below %[2]s (the stretch already walked) that meet the
// filters and the words (%[1]s). The stretch has just shown the words to
// be rare among the jobs that meet the filters, and more such jobs to
// exist than it read, so the text index, which reads only the matches of
// the words, is the plan. The statement leaves the planner no other: the
// filters are checks of the rows read (IS TRUE), which no index answers
// (their indexes would read every job that meets them: the planner has no
// statistics for lower(location), whose index is partial, and takes any
// location for 0.5 % of the jobs); the cursor and the bound are checks too
// (see searchAfterChecked); ORDER BY j.id + 0 cannot be had from
// jobs_open_id_idx, so no walk is left to choose; and the text condition
// hides the query from the planner in a subquery, so that it assumes the
// 0.5 % it assumes for any query it cannot see, rather than its own guess
// for these words, with which it could prefer to read every open job. A
// company's search keeps its company condition as is: the text index holds
// open jobs only, and jobs_company_idx reads only the company's jobs.
const searchIndexSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %[1]s%[2]s
ORDER BY j.id + 0 DESC
LIMIT %[3]d`

// Stretches of the newest jobs that a text search checks one by one before
// it asks the text index, per row of the page: searchWindowPerRow ids when
// no filter is given (a word in one job of searchWindowPerRow fills the
// page there), and searchWalkPerRow jobs that meet the filters.
const (
	searchWindowPerRow = 150
	searchWalkPerRow   = 20
)
