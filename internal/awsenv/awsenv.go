// Package awsenv builds the functions' AWS SDK configuration from their
// environment alone, which is where Lambda puts everything a function
// needs: the region (AWS_REGION), the execution role's temporary
// credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)
// and, locally, the stand-ins' endpoints (AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_SESV2, ...).
//
// It takes the place of the SDK's config.LoadDefaultConfig, which looks
// further (shared config and credentials files, profiles, SSO, web
// identity, the container and instance metadata endpoints) and so links
// the SSO, SSO OIDC, STS and sign-in clients into every binary: about
// 1.7 MB each, and their package initialisation at every cold start, for
// sources a Lambda function never uses. The service clients resolve the
// endpoint variables exactly as with LoadDefaultConfig: this package hands
// them to the SDK as a configuration source, and the clients apply the
// SDK's own precedence.
package awsenv

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// The environment variables Load reads. Lambda sets the region and the
// credentials; the endpoint variables are the SDK's standard ones
// ("service-specific endpoints"), for local stand-ins.
const (
	EnvRegion          = "AWS_REGION"
	EnvDefaultRegion   = "AWS_DEFAULT_REGION"
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
	// EnvEndpointURL is the endpoint of every service without its own
	// AWS_ENDPOINT_URL_<SERVICE>.
	EnvEndpointURL = "AWS_ENDPOINT_URL"
	// EnvEndpointURLPrefix, followed by a service's SDK id in capitals with
	// spaces as underscores (SQS, SESV2, SECRETS_MANAGER), is that
	// service's endpoint.
	EnvEndpointURLPrefix = "AWS_ENDPOINT_URL_"
	// EnvIgnoreConfiguredEndpointURLs set to true ignores the endpoint
	// variables.
	EnvIgnoreConfiguredEndpointURLs = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"
)

// ErrNoCredentials is returned (wrapped) by the configuration's credentials
// provider, at the first request that needs credentials, when the
// environment holds none.
var ErrNoCredentials = errors.New("AWS credentials: " + EnvAccessKeyID + " and " + EnvSecretAccessKey + " are not set")

// credentialsSource names these credentials in the SDK's logs and errors.
const credentialsSource = "awsenv"

// Services are the SDK ids of the services the functions call, whose
// endpoint variables (AWS_ENDPOINT_URL_<SERVICE>) Load reads. A client of
// another service takes AWS_ENDPOINT_URL or AWS's own endpoint: add its id
// here to point it elsewhere.
var Services = []string{"SQS", "SESv2", "Secrets Manager", "Lambda", "CodeDeploy"}

// Load returns the AWS configuration that getenv describes: the region from
// AWS_REGION (else AWS_DEFAULT_REGION), static credentials from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the optional
// AWS_SESSION_TOKEN, and the endpoint variables of Services. Everything
// else is the SDK's default, filled in by each service client (its HTTP
// client, retryer and signer).
//
// Load reads every variable it may use at once, whatever their values,
// and never later: the configuration holds values, not the environment. It
// fails at nothing: without a region the SDK refuses the first request,
// without credentials the provider answers ErrNoCredentials, as
// LoadDefaultConfig's clients would fail.
func Load(getenv func(string) string) aws.Config {
	region := getenv(EnvRegion)
	if defaultRegion := getenv(EnvDefaultRegion); region == "" {
		region = defaultRegion
	}
	creds := aws.Credentials{
		AccessKeyID:     getenv(EnvAccessKeyID),
		SecretAccessKey: getenv(EnvSecretAccessKey),
		SessionToken:    getenv(EnvSessionToken),
		Source:          credentialsSource,
	}
	src := &endpoints{
		ignore:  strings.EqualFold(getenv(EnvIgnoreConfiguredEndpointURLs), "true"),
		service: map[string]string{},
	}
	all := getenv(EnvEndpointURL)
	for _, id := range Services {
		if u := getenv(EndpointVariable(id)); u != "" {
			src.service[id] = u
		}
	}
	cfg := aws.Config{
		Region:        region,
		Credentials:   aws.NewCredentialsCache(staticCredentials(creds)),
		ConfigSources: []any{src},
	}
	if src.ignore {
		src.service = nil
		return cfg
	}
	if all != "" {
		cfg.BaseEndpoint = &all
	}
	return cfg
}

// staticCredentials answers the same credentials every time, or
// ErrNoCredentials. Lambda's credentials last as long as the execution
// environment, so they are never looked up again (as the SDK's own
// environment provider does not either).
func staticCredentials(c aws.Credentials) aws.CredentialsProviderFunc {
	return func(context.Context) (aws.Credentials, error) {
		if !c.HasKeys() {
			return aws.Credentials{}, ErrNoCredentials
		}
		return c, nil
	}
}

// endpoints is the configuration source that the SDK's service clients ask
// for their endpoint (GetServiceBaseEndpoint) and whether the configured
// endpoints are to be ignored (GetIgnoreConfiguredEndpoints); the SDK finds
// both methods by interface on aws.Config.ConfigSources.
type endpoints struct {
	ignore bool
	// service maps an SDK id to its endpoint variable's value; nil when
	// the variables are ignored.
	service map[string]string
}

// GetServiceBaseEndpoint returns AWS_ENDPOINT_URL_<SERVICE> for the service
// whose SDK id is sdkID ("SQS", "SESv2", "Secrets Manager"), as Load read
// it.
func (e *endpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	u := e.service[sdkID]
	return u, u != "", nil
}

// GetIgnoreConfiguredEndpoints reports AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
func (e *endpoints) GetIgnoreConfiguredEndpoints(context.Context) (value, found bool, err error) {
	return e.ignore, e.ignore, nil
}

// EndpointVariable is the environment variable that holds the endpoint of
// the service whose SDK id is sdkID: AWS_ENDPOINT_URL_SQS for "SQS",
// AWS_ENDPOINT_URL_SECRETS_MANAGER for "Secrets Manager".
func EndpointVariable(sdkID string) string {
	return EnvEndpointURLPrefix + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_")
}
