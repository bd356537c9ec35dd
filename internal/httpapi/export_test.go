package httpapi

// RoutePatterns returns the patterns that addRoutes registers, so that a test
// can compare them with the OpenAPI document.
func RoutePatterns() []string {
	var patterns []string
	for _, rt := range newServer(Config{Password: PasswordParams{MemoryKiB: 8, Time: 1, Threads: 1}}).routes {
		patterns = append(patterns, rt.pattern)
	}
	return patterns
}

// Access is who may call a route, as the route table says.
type Access string

// The accesses, as RouteAccess names them.
const (
	Public         Access = "public"
	OptionalSignIn Access = "optional sign-in"
	SignedIn       Access = "signed in"
)

// RouteAccess returns each registered route's access, by pattern.
func RouteAccess() map[string]Access {
	names := map[access]Access{public: Public, optionalSignIn: OptionalSignIn, signedIn: SignedIn}
	out := map[string]Access{}
	for _, rt := range newServer(Config{Password: PasswordParams{MemoryKiB: 8, Time: 1, Threads: 1}}).routes {
		out[rt.pattern] = names[rt.access]
	}
	return out
}
