package httpapi

// RoutePatterns returns the patterns that addRoutes registers, so that a test
// can compare them with the OpenAPI document.
func RoutePatterns() []string {
	return newServer(Config{Password: PasswordParams{MemoryKiB: 8, Time: 1, Threads: 1}}).patterns
}
