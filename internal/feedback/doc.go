// Package feedback applies SES's delivery feedback: the events that the
// configuration set publishes through SNS to the feedback queue (sends,
// deliveries, bounces, complaints). A hard bounce or a complaint puts the
// address on the project's suppression list, a soft bounce is counted,
// and every event moves the email's delivery state; each event is applied
// once, by its own key, however often it arrives. Malformed messages and
// records the database could not take are reported back as failed, so
// SQS retries them and, after maxReceiveCount, keeps them in the DLQ.
package feedback
