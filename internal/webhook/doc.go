// Package webhook is the delivery function: the handler that the SQS event
// source mapping of the webhook queue invokes with batches of
// webhook.delivery_requested events. For each it leases the delivery (one
// short statement, as the database role jobboard_webhooks), signs the
// event's payload as the Standard Webhooks specification says, POSTs it
// through a client that cannot reach internal addresses (Client), records
// the attempt (one statement), and gives a failed delivery its backoff
// through ChangeMessageVisibility, for up to three days.
//
// docs/webhooks.md is the receivers' reference; docs/design.md has the
// pipeline and its outcome table.
package webhook
