// Package quota stands in for an SES account's sending quota, and
// measures the worker against it: SES is the local stand-in
// (internal/dev/localaws) behind Proxy, which answers GetAccount with the
// quota's MaxSendRate, adds the service's latency to every SendEmail, and
// answers 429 TooManyRequestsException ("Maximum sending rate exceeded.")
// to a send its token bucket has no token for, as SES does. ReceiveCounter
// sits in front of the SQS stand-in and counts, per event, how often the
// workers received it.
//
// Its tests run several worker processes (functions/worker, built from
// this repository, in their local polling mode) against one database and
// the proxy: the pacing they share keeps SES within its quota, throttling
// dead-letters nothing, and account mail goes ahead of a status backlog.
// BenchmarkQuotaScenario (make bench) measures a burst against the ideal
// n / quota; docs/performance.md has the figures.
//
// It is a test and benchmark tool, not part of any deployed function.
package quota
