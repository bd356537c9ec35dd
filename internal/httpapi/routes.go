package httpapi

// addRoutes registers every endpoint of the API. It is the one place to read
// to see what the API offers; openapi.json documents the same set (a test
// keeps the two in step).
func (s *server) addRoutes() {
	s.add("GET /healthz", s.healthz)
	s.add("GET /readyz", s.readyz)
	s.add("GET /v1/openapi.json", serveOpenAPI)

	s.addWrite("POST /v1/auth/register", keysIgnored, s.register)
	s.addWrite("POST /v1/auth/login", keysIgnored, s.login)
	s.addWrite("POST /v1/auth/verify-email", keysPerUser, s.verifyEmail)
	s.addWrite("POST /v1/auth/resend-verification", keysPerUser, s.resendVerification)
	s.addWrite("POST /v1/auth/password-reset", keysIgnored, s.requestPasswordReset)
	s.addWrite("POST /v1/auth/password-reset/confirm", keysIgnored, s.resetPassword)
	s.add("GET /v1/me", s.me)
	s.add("GET /v1/me/applications", s.myApplications)
	s.addWrite("POST /v1/me/email-delivery/resume", keysPerUser, s.resumeEmailDelivery)

	s.addWrite("POST /v1/companies", keysPerUser, s.createCompany)
	s.add("GET /v1/companies/{id}", s.company)
	s.addWrite("POST /v1/companies/{id}/jobs", keysPerUser, s.createJob)

	s.add("GET /v1/jobs", s.searchJobs)
	s.add("GET /v1/jobs/{id}", s.job)
	s.addWrite("PATCH /v1/jobs/{id}", keysPerUser, s.updateJob)
	s.addWrite("POST /v1/jobs/{id}/applications", keysPerUser, s.apply)
	s.add("GET /v1/jobs/{id}/applications", s.jobApplications)

	s.add("GET /v1/applications/{id}", s.application)
	s.addWrite("PATCH /v1/applications/{id}", keysPerUser, s.changeStatus)
	s.add("GET /v1/applications/{id}/history", s.history)

	s.addWrite("POST /v1/companies/{id}/webhooks", keysSecretAnswer, s.createWebhook)
	s.add("GET /v1/companies/{id}/webhooks", s.listWebhooks)
	s.add("GET /v1/companies/{id}/webhooks/{wid}", s.getWebhook)
	s.addWrite("PATCH /v1/companies/{id}/webhooks/{wid}", keysPerUser, s.updateWebhook)
	s.addWrite("DELETE /v1/companies/{id}/webhooks/{wid}", keysNone, s.deleteWebhook)
	s.addWrite("POST /v1/companies/{id}/webhooks/{wid}/rotate-secret", keysSecretAnswer, s.rotateWebhookSecret)
	s.addWrite("POST /v1/companies/{id}/webhooks/{wid}/ping", keysPerUser, s.pingWebhook)
	s.add("GET /v1/companies/{id}/webhooks/{wid}/deliveries", s.webhookDeliveries)
	s.addWrite("POST /v1/companies/{id}/webhooks/{wid}/deliveries/{did}/replay", keysPerUser, s.replayWebhookDelivery)

	s.mux.HandleFunc(unmatchedPattern, s.unmatched)
}

// add registers an apiFunc under a Go 1.22 pattern and remembers the
// pattern for the test that compares routes with the OpenAPI document. It
// is for the routes that write nothing: the reads.
func (s *server) add(pattern string, h apiFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, s.handle(h))
}

// addWrite registers a POST, PATCH or DELETE route: its handler runs as
// one unit of work (write, write.go), keyed when policy takes the
// request's Idempotency-Key, and gets the Writes to write through.
func (s *server) addWrite(pattern string, policy keyPolicy, h writeFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, s.handle(s.write(policy, h)))
}
