// Package postgres is the PostgreSQL adapter: the connection pool, the
// embedded schema migrations, the unit of work every write runs in
// (DB.Write), and every SQL statement of the job board, each as a constant
// beside the method that runs it.
//
// Store methods take the acting user and enforce in SQL what that user may
// see and change; rows the actor may not see are reported as
// jobboard.ErrNotFound, exactly like rows that do not exist.
package postgres
