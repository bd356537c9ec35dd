package postgres

import "github.com/jobboard/jobboard/internal/jobboard"

// SetSearchWalk makes db's text searches check only the newest rows jobs
// one by one before they ask the indexes (0 restores the default).
func SetSearchWalk(db *DB, rows int) { db.searchWalk = rows }

// SearchStatements returns the statements SearchJobs runs for an anonymous
// search of a page of limit jobs: the first, and for a text search the one
// that answers from the indexes when the first does not fill the page
// (else ""), and their arguments.
func SearchStatements(db *DB, f jobboard.JobFilter, limit int) (first, byIndex string, args []any) {
	return db.searchStatements(nil, f, limit)
}

// SearchWalk is the default walk of a text search for query and rows rows.
var SearchWalk = searchWalk
