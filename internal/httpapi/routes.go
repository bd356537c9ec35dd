package httpapi

// addRoutes registers every endpoint of the API. It is the one place to read
// to see what the API offers, and who may call each route (access);
// openapi.json documents the same set (a test keeps the two in step).
func (s *server) addRoutes() {
	s.add("GET /healthz", public, s.healthz)
	s.add("GET /readyz", public, s.readyz)
	s.add("GET /v1/openapi.json", public, serveOpenAPI)

	s.addWrite("POST /v1/auth/register", public, keysIgnored, s.register)
	s.addWrite("POST /v1/auth/login", public, keysIgnored, s.login)
	s.addWrite("POST /v1/auth/verify-email", public, keysIgnored, s.verifyEmail)
	s.addWrite("POST /v1/auth/resend-verification", signedIn, keysPerUser, s.resendVerification)
	s.addWrite("POST /v1/auth/password-reset", public, keysIgnored, s.requestPasswordReset)
	s.addWrite("POST /v1/auth/password-reset/confirm", public, keysIgnored, s.resetPassword)
	s.add("GET /v1/me", signedIn, s.me)
	s.add("GET /v1/me/applications", signedIn, s.myApplications)
	s.addWrite("POST /v1/me/email-delivery/resume", signedIn, keysPerUser, s.resumeEmailDelivery)

	s.addWrite("POST /v1/companies", signedIn, keysPerUser, s.createCompany)
	s.add("GET /v1/companies/{id}", optionalSignIn, s.company)
	s.addWrite("POST /v1/companies/{id}/jobs", signedIn, keysPerUser, s.createJob)

	s.add("GET /v1/jobs", optionalSignIn, s.searchJobs)
	s.add("GET /v1/jobs/{id}", optionalSignIn, s.job)
	s.addWrite("PATCH /v1/jobs/{id}", signedIn, keysPerUser, s.updateJob)
	s.addWrite("POST /v1/jobs/{id}/applications", signedIn, keysPerUser, s.apply)
	s.add("GET /v1/jobs/{id}/applications", signedIn, s.jobApplications)

	s.add("GET /v1/applications/{id}", signedIn, s.application)
	s.addWrite("PATCH /v1/applications/{id}", signedIn, keysPerUser, s.changeStatus)
	s.add("GET /v1/applications/{id}/history", signedIn, s.history)

	s.addWrite("POST /v1/companies/{id}/webhooks", signedIn, keysSecretAnswer, s.createWebhook)
	s.add("GET /v1/companies/{id}/webhooks", signedIn, s.listWebhooks)
	s.add("GET /v1/companies/{id}/webhooks/{wid}", signedIn, s.getWebhook)
	s.addWrite("PATCH /v1/companies/{id}/webhooks/{wid}", signedIn, keysPerUser, s.updateWebhook)
	s.addWrite("DELETE /v1/companies/{id}/webhooks/{wid}", signedIn, keysNone, s.deleteWebhook)
	s.addWrite("POST /v1/companies/{id}/webhooks/{wid}/rotate-secret", signedIn, keysSecretAnswer, s.rotateWebhookSecret)
	s.addWrite("POST /v1/companies/{id}/webhooks/{wid}/ping", signedIn, keysPerUser, s.pingWebhook)
	s.add("GET /v1/companies/{id}/webhooks/{wid}/deliveries", signedIn, s.webhookDeliveries)
	s.addWrite("POST /v1/companies/{id}/webhooks/{wid}/deliveries/{did}/replay", signedIn, keysPerUser, s.replayWebhookDelivery)

	s.mux.HandleFunc(unmatchedPattern, s.unmatched)
}

// route is a registered route, remembered for the tests that compare the
// routes with the OpenAPI document and try each with an ended session.
type route struct {
	pattern string
	access  access
}

// add registers an apiFunc under a Go 1.22 pattern, behind the sign-in
// check its access asks for (authenticate). It is for the routes that
// write nothing: the reads.
func (s *server) add(pattern string, acc access, h apiFunc) {
	s.routes = append(s.routes, route{pattern, acc})
	s.mux.Handle(pattern, s.handle(s.authenticate(acc, h)))
}

// addWrite registers a POST, PATCH or DELETE route: behind the sign-in
// check of its access (before anything else, a stored Idempotency-Key
// answer included), its handler runs as one unit of work (write,
// write.go), keyed when policy takes the request's Idempotency-Key, and
// gets the Writes to write through.
func (s *server) addWrite(pattern string, acc access, policy keyPolicy, h writeFunc) {
	s.routes = append(s.routes, route{pattern, acc})
	s.mux.Handle(pattern, s.handle(s.authenticate(acc, s.write(policy, h))))
}
