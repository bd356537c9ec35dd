// Package queue carries status events over Amazon SQS, in both directions of
// the wire format of DESIGN.md: Publisher sends them (the outbox relay and
// the sweeper), DecodeStatusEvent reads them back (the worker), and Poller
// plays the Lambda SQS event source mapping locally (`make dev`, tests).
//
// The message body is the JSON of jobboard.StatusChangedEvent:
//
//	{"type":"application.status_changed","event_id":"6f1c…","occurred_at":"2026-12-02T10:00:00Z",
//	 "application_id":42,"old_status":"reviewing","new_status":"interview"}
//
// and the String message attribute "type" carries the same type.
package queue
