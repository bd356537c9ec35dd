package jobboard

// The pipeline's webhook events. Each outbox row goes to one queue: the
// webhook deliveries to the webhook queue (the delivery function), the rest
// to the status events queue (the email worker). A change that both emails
// and calls webhooks writes one row for each (see docs/design.md).
const (
	// EventTypeWebhookDelivery asks the delivery function to attempt one
	// delivery (DeliveryID) of the dispatch Generation: written with the
	// change, by a replay or by a ping.
	EventTypeWebhookDelivery = "webhook.delivery_requested"
	// EventTypeWebhookEndpointDisabled asks the email worker to tell one
	// member (UserID) of a company (CompanyID) that an endpoint
	// (EndpointID) was disabled after failing for days. The email has a
	// fixed text.
	EventTypeWebhookEndpointDisabled = "webhook.endpoint_disabled"
)

func init() {
	requiredFields[EventTypeWebhookDelivery] = func(ev Event) string {
		switch {
		case ev.DeliveryID <= 0:
			return "missing or non-positive delivery_id"
		case ev.Generation <= 0:
			return "missing or non-positive generation"
		}
		return ""
	}
	requiredFields[EventTypeWebhookEndpointDisabled] = func(ev Event) string {
		switch {
		case ev.UserID <= 0:
			return "missing or non-positive user_id"
		case ev.EndpointID <= 0:
			return "missing or non-positive endpoint_id"
		case ev.CompanyID <= 0:
			return "missing or non-positive company_id"
		}
		return ""
	}
}

// ForWebhookQueue reports whether events of type typ go to the webhook
// queue rather than the status events queue.
func ForWebhookQueue(typ string) bool { return typ == EventTypeWebhookDelivery }
