package webhook

import (
	"github.com/jobboard/jobboard/internal/emf"
	"github.com/jobboard/jobboard/internal/sqsbatch"
)

// The delivery function's metrics (namespace jobboard, dimension
// Service=webhooks, and in Lambda also Service and FunctionVersion), every
// one on every batch's line: a zero is a data point too. A deploy's
// rollback alarm reads WebhookStoreErrors by version.
const (
	metricAttempts          = "WebhookAttempts"
	metricDelivered         = "WebhookDelivered"
	metricAttemptFailures   = "WebhookAttemptFailures"
	metricDeliveriesFailed  = "WebhookDeliveriesFailed"
	metricEndpointsDisabled = "WebhookEndpointsDisabled"
	metricStoreErrors       = "WebhookStoreErrors"
	metricMalformed         = "WebhookMalformedMessages"
	// metricDeferred counts deliveries put off because their company's
	// slow slots were taken (jobboard.WebhookSlowSlots).
	metricDeferred = "WebhookDeferred"
)

// metricsService is the Service dimension of the lines.
const metricsService = "webhooks"

// writeMetrics writes the batch's line.
func (h *Handler) writeMetrics(recs []sqsbatch.Record[*delivery]) {
	counts := map[string]float64{}
	for _, rec := range recs {
		r := rec.Value.res
		if r.attempted {
			counts[metricAttempts]++
			if r.statusErr {
				counts[metricAttemptFailures]++
			}
		}
		switch r.outcome {
		case outcomeDelivered:
			counts[metricDelivered]++
		case outcomeGone, outcomeExhausted:
			counts[metricDeliveriesFailed]++
		case outcomeStoreError:
			counts[metricStoreErrors]++
		case outcomeMalformed:
			counts[metricMalformed]++
		case outcomeDeferred:
			counts[metricDeferred]++
		}
		if r.disabled {
			counts[metricEndpointsDisabled]++
		}
	}
	names := []string{metricAttempts, metricDelivered, metricAttemptFailures, metricDeliveriesFailed,
		metricEndpointsDisabled, metricStoreErrors, metricMalformed, metricDeferred}
	ms := make([]emf.Metric, len(names))
	for i, n := range names {
		ms[i] = emf.Metric{Name: n, Unit: emf.Count, Value: counts[n]}
	}
	emf.WriteByVersion(h.c.Metrics, metricsService, h.c.FunctionVersion, h.c.Now(), ms...)
}
