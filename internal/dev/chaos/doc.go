// Package chaos is the repository's own proof of the email promise under
// faults: every committed status change reaches its candidate as one email,
// except inside the documented window, while processes die, freeze and lose
// their database sessions and SQS and SES fail, hang, reset and slow down.
//
// Run starts everything itself on free ports: a fresh database on the
// PostgreSQL server it is given (dropped at the end), the SQS and SES
// stand-ins (internal/dev/localaws) behind fault proxies (internal/dev/faultproxy),
// the queue and its dead-letter queue, two API processes, several workers
// in their local polling mode and the sweeper, all built from this
// repository with `go build`. It drives status changes through the real
// HTTP API while a seeded schedule injects faults, lets the system settle,
// redrives the dead-letter queue, probes the retention (events older than
// it must not be emailed again, nor published), and counts per event_id,
// from the database, the SES stand-in's store and the DLQ, what was lost
// and what was emailed twice. Each duplicate is classified against the
// window the design documents, using the workers' JSON logs.
//
// `make chaos` runs the full configuration (Full) through internal/dev/cmd/chaos;
// `go test` runs the short one (Short).
package chaos
