package httpapi

import (
	"net/http"
	"strings"
)

// addRoutes registers every endpoint of the API. It is the one place to read
// to see what the API offers; openapi.json documents the same set (a test
// keeps the two in step).
func (s *server) addRoutes() {
	s.add("GET /healthz", s.healthz)
	s.add("GET /readyz", s.readyz)
	s.add("GET /v1/openapi.json", serveOpenAPI)

	s.addKeyed("POST /v1/auth/register", keysIgnored, s.register)
	s.addKeyed("POST /v1/auth/login", keysIgnored, s.login)
	s.add("POST /v1/auth/verify-email", s.verifyEmail)
	s.add("POST /v1/auth/resend-verification", s.resendVerification)
	s.addKeyed("POST /v1/auth/password-reset", keysIgnored, s.requestPasswordReset)
	s.addKeyed("POST /v1/auth/password-reset/confirm", keysIgnored, s.resetPassword)
	s.add("GET /v1/me", s.me)
	s.add("GET /v1/me/applications", s.myApplications)
	s.add("POST /v1/me/email-delivery/resume", s.resumeEmailDelivery)

	s.add("POST /v1/companies", s.createCompany)
	s.add("GET /v1/companies/{id}", s.company)
	s.add("POST /v1/companies/{id}/jobs", s.createJob)

	s.add("GET /v1/jobs", s.searchJobs)
	s.add("GET /v1/jobs/{id}", s.job)
	s.add("PATCH /v1/jobs/{id}", s.updateJob)
	s.add("POST /v1/jobs/{id}/applications", s.apply)
	s.add("GET /v1/jobs/{id}/applications", s.jobApplications)

	s.add("GET /v1/applications/{id}", s.application)
	s.add("PATCH /v1/applications/{id}", s.changeStatus)
	s.add("GET /v1/applications/{id}/history", s.history)

	s.addKeyed("POST /v1/companies/{id}/webhooks", keysSecretAnswer, s.createWebhook)
	s.add("GET /v1/companies/{id}/webhooks", s.listWebhooks)
	s.add("GET /v1/companies/{id}/webhooks/{wid}", s.getWebhook)
	s.add("PATCH /v1/companies/{id}/webhooks/{wid}", s.updateWebhook)
	s.add("DELETE /v1/companies/{id}/webhooks/{wid}", s.deleteWebhook)
	s.addKeyed("POST /v1/companies/{id}/webhooks/{wid}/rotate-secret", keysSecretAnswer, s.rotateWebhookSecret)
	s.add("POST /v1/companies/{id}/webhooks/{wid}/ping", s.pingWebhook)
	s.add("GET /v1/companies/{id}/webhooks/{wid}/deliveries", s.webhookDeliveries)
	s.add("POST /v1/companies/{id}/webhooks/{wid}/deliveries/{did}/replay", s.replayWebhookDelivery)
}

// add registers an apiFunc under a Go 1.22 pattern and remembers the
// pattern for the test that compares routes with the OpenAPI document.
// Every POST and PATCH takes an Idempotency-Key (keyed, idempotency.go),
// scoped to the signed-in user unless addKeyed says otherwise.
func (s *server) add(pattern string, h apiFunc) {
	s.addKeyed(pattern, keysPerUser, h)
}

func (s *server) addKeyed(pattern string, policy keyPolicy, h apiFunc) {
	s.patterns = append(s.patterns, pattern)
	if strings.HasPrefix(pattern, http.MethodPost+" ") || strings.HasPrefix(pattern, http.MethodPatch+" ") {
		h = s.keyed(policy, h)
	}
	s.mux.Handle(pattern, s.handle(h))
}
