// Package queue carries events over Amazon SQS: Publisher sends them (the
// outbox relay and the sweeper) in the wire form of jobboard.EncodeEvent,
// with the String message attribute "type" carrying the event's type, and
// Redeliverer gives a failed record its backoff. What receives them is the
// Lambda SQS event source mapping (locally, internal/function/eventsource).
package queue
