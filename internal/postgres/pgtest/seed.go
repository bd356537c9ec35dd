package pgtest

import (
	"context"
	"fmt"
)

// seedJobsSQL makes $2 jobs for company $1 in one statement. Two hashes of the
// series number pick each field independently, so fields do not correlate
// and words occur with distinct frequencies: "engineer" in about 40% of
// titles, "go" 18%, "python" 12%, "nurse" 8%, "designer" 6%, "rust" 1%, and
// "kubernetes" in about 1 description in 8. One job in ten is closed, one
// in five has no salary, one in three is remote.
const seedJobsSQL = `
INSERT INTO jobs (company_id, title, description, location, remote, employment_type,
	salary_min, salary_max, salary_currency, status)
SELECT $1,
	(ARRAY['', 'Senior ', 'Junior ', 'Lead ', 'Staff '])[1 + (h1 / 100) % 5] || r.title,
	r.body || ' ' || (ARRAY[
		'Experience with Kubernetes and cloud infrastructure is a plus.',
		'You will mentor colleagues and help shape how the team works.',
		'We offer flexible hours, a learning budget and good coffee.',
		'Our customers range from small shops to large hospitals.',
		'Fluent English is required; German or French is welcome.',
		'You will join a small team that ships every day.',
		'We care about accessibility, privacy and sustainable pace.',
		'Travel to our offices is needed about once a quarter.'])[1 + (h2 / 7) % 8],
	(ARRAY['Berlin', 'London', 'New York', 'San Francisco', 'Paris', 'Amsterdam',
		'Toronto', 'Lisbon', 'Austin', 'Singapore'])[1 + (h1 / 500) % 10],
	(h1 / 5000) % 3 = 0,
	CASE WHEN (h1 / 15000) % 100 < 60 THEN 'full_time'
	     WHEN (h1 / 15000) % 100 < 72 THEN 'part_time'
	     WHEN (h1 / 15000) % 100 < 87 THEN 'contract'
	     WHEN (h1 / 15000) % 100 < 95 THEN 'internship'
	     ELSE 'temporary' END,
	CASE WHEN h2 % 5 > 0 THEN 30000 + (h2 / 56) % 120 * 1000 END,
	CASE WHEN h2 % 5 > 0 THEN 30000 + (h2 / 56) % 120 * 1000 + 10000 + (h2 / 6720) % 60 * 1000 END,
	CASE WHEN h2 % 5 > 0 THEN (ARRAY['USD', 'EUR', 'GBP'])[1 + (h2 / 403200) % 3] END,
	CASE WHEN (h1 / 1500000) % 10 = 0 THEN 'closed' ELSE 'open' END
FROM (
	SELECT g, hashint4(g)::bigint + 2147483648 AS h1, hashint4(-g)::bigint + 2147483648 AS h2
	FROM generate_series(1, $2::int) AS g
) AS s
CROSS JOIN LATERAL (
	SELECT (ARRAY[
		'Backend Engineer (Go)', 'Python Developer', 'Frontend Engineer', 'Registered Nurse',
		'Product Designer', 'Data Analyst', 'Sales Manager', 'Customer Support Specialist',
		'DevOps Engineer', 'Accountant', 'Warehouse Associate', 'Site Reliability Engineer',
		'Rust Engineer'])[k] AS title,
	(ARRAY[
		'Design, build and operate backend services in Go on PostgreSQL and AWS.',
		'Write Python services and data pipelines with Django and pandas.',
		'Build fast, accessible web interfaces with TypeScript and React.',
		'Provide patient care on a busy surgical ward alongside doctors and nurses.',
		'Design products end to end in Figma, from user research to polished screens.',
		'Turn data into decisions with SQL, Python notebooks and dashboards.',
		'Grow accounts and lead a sales team across the region.',
		'Help customers by email and chat and improve our help centre.',
		'Automate infrastructure with Terraform, CI pipelines and Kubernetes.',
		'Keep the books, run payroll and prepare the yearly accounts.',
		'Pick, pack and ship orders in our modern warehouse.',
		'Keep production reliable: on-call, observability and capacity planning in Go.',
		'Build high-performance systems software in Rust.'])[k] AS body
	FROM (SELECT CASE
		WHEN h1 % 100 < 18 THEN 1 WHEN h1 % 100 < 30 THEN 2 WHEN h1 % 100 < 40 THEN 3
		WHEN h1 % 100 < 48 THEN 4 WHEN h1 % 100 < 54 THEN 5 WHEN h1 % 100 < 62 THEN 6
		WHEN h1 % 100 < 70 THEN 7 WHEN h1 % 100 < 78 THEN 8 WHEN h1 % 100 < 84 THEN 9
		WHEN h1 % 100 < 90 THEN 10 WHEN h1 % 100 < 96 THEN 11 WHEN h1 % 100 < 99 THEN 12
		ELSE 13 END AS k) AS pick
) AS r`

const analyzeJobsSQL = `ANALYZE jobs`

// SeedJobs inserts n varied jobs for the company with a single INSERT ...
// SELECT FROM generate_series, through the raw pool, then refreshes the
// table's statistics. Titles, descriptions, locations, remote, employment
// types, salaries and statuses vary the way real listings do, so searches
// over them behave realistically: it is for the tests and benchmarks of
// search. It returns the database's error (for instance a foreign key
// violation when the company does not exist).
func (db *DB) SeedJobs(ctx context.Context, companyID int64, n int) error {
	if _, err := db.Pool.Exec(ctx, seedJobsSQL, companyID, n); err != nil {
		return fmt.Errorf("seed %d jobs for company %d: %w", n, companyID, err)
	}
	// Fresh statistics, so that searches are planned for the new data now
	// rather than after autovacuum gets round to it.
	if _, err := db.Pool.Exec(ctx, analyzeJobsSQL); err != nil {
		return fmt.Errorf("analyze jobs after seeding: %w", err)
	}
	return nil
}
