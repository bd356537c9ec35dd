// Package localaws runs the local stand-ins for the AWS services the job
// board uses: fauxqs for SQS and aws-ses-v2-local for SES v2, both npm
// packages installed into .ci/localaws by `make localaws`. Tests of several
// packages and `make dev` use it.
//
// StartSQS and StartSES start a stand-in bound to 127.0.0.1 and return once
// it answers its health check; Close stops it. SQS and SES are the test
// helpers: one stand-in of each per test process, shared by the tests of a
// package (each test uses its own queues and its own recipients).
//
// Clients for the stand-ins are ordinary SDK clients with a BaseEndpoint
// (NewSQSClient, NewSESClient): production code needs no special branch.
package localaws
