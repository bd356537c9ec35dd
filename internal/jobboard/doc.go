// Package jobboard holds the domain of the job board: users, companies, jobs,
// applications and their status workflow, the status-changed event, the error
// kinds every adapter speaks, and the interfaces that several adapters share.
//
// It imports only the standard library. Adapters (postgres, httpapi, queue,
// mail, worker) depend on it; it depends on none of them.
package jobboard
