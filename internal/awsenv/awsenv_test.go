package awsenv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/codedeploy"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/internal/awsenv"
	"github.com/jobboard/jobboard/internal/dev/localaws"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// As in Lambda: region, and the role's temporary credentials with their
// session token, from the environment.
func TestLoadTakesRegionAndCredentialsFromTheEnvironment(t *testing.T) {
	t.Parallel()
	cfg := awsenv.Load(env(map[string]string{
		"AWS_REGION":            "eu-west-1",
		"AWS_DEFAULT_REGION":    "us-west-2",
		"AWS_ACCESS_KEY_ID":     "ASIAEXAMPLE",
		"AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_SESSION_TOKEN":     "token",
	}))
	if cfg.Region != "eu-west-1" {
		t.Errorf("region %q; want AWS_REGION's eu-west-1", cfg.Region)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID != "ASIAEXAMPLE" || creds.SecretAccessKey != "secret" || creds.SessionToken != "token" || creds.CanExpire {
		t.Errorf("credentials %+v; want the environment's, not expiring", creds)
	}
	if got := sqs.NewFromConfig(cfg).Options().Region; got != "eu-west-1" {
		t.Errorf("SQS client region %q", got)
	}

	if got := awsenv.Load(env(map[string]string{"AWS_DEFAULT_REGION": "us-west-2"})).Region; got != "us-west-2" {
		t.Errorf("without AWS_REGION: region %q; want AWS_DEFAULT_REGION's", got)
	}
}

// Without credentials the first request fails, naming the variables.
func TestLoadWithoutCredentialsFailsTheRequest(t *testing.T) {
	t.Parallel()
	cfg := awsenv.Load(env(map[string]string{"AWS_REGION": localaws.Region, "AWS_ENDPOINT_URL_SQS": localaws.SQS(t).Endpoint}))
	_, err := sqs.NewFromConfig(cfg).ListQueues(context.Background(), &sqs.ListQueuesInput{})
	if !errors.Is(err, awsenv.ErrNoCredentials) {
		t.Errorf("ListQueues without credentials: %v; want ErrNoCredentials", err)
	}
}

// AWS_ENDPOINT_URL_<SERVICE> reaches each service's client, the way the
// SDK's shared configuration does; a real request to the SQS stand-in
// proves the client uses it.
func TestLoadHonoursServiceEndpoints(t *testing.T) {
	t.Parallel()
	sqsEndpoint := localaws.SQS(t).Endpoint
	cfg := awsenv.Load(env(map[string]string{
		"AWS_REGION":                       localaws.Region,
		"AWS_ACCESS_KEY_ID":                "test",
		"AWS_SECRET_ACCESS_KEY":            "test",
		"AWS_ENDPOINT_URL_SQS":             sqsEndpoint,
		"AWS_ENDPOINT_URL_SESV2":           "http://127.0.0.1:4002",
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:4000",
		"AWS_ENDPOINT_URL_LAMBDA":          "http://127.0.0.1:4003",
		"AWS_ENDPOINT_URL_CODEDEPLOY":      "http://127.0.0.1:4004",
	}))
	client := sqs.NewFromConfig(cfg)
	name := fmt.Sprintf("awsenv-%d", time.Now().UnixNano())
	if _, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: &name}); err != nil {
		t.Fatalf("CreateQueue through AWS_ENDPOINT_URL_SQS: %v", err)
	}
	for _, c := range []struct {
		service string
		got     *string
		want    string
	}{
		{"SQS", client.Options().BaseEndpoint, sqsEndpoint},
		{"SESv2", sesv2.NewFromConfig(cfg).Options().BaseEndpoint, "http://127.0.0.1:4002"},
		{"Secrets Manager", secretsmanager.NewFromConfig(cfg).Options().BaseEndpoint, "http://127.0.0.1:4000"},
		{"Lambda", lambda.NewFromConfig(cfg).Options().BaseEndpoint, "http://127.0.0.1:4003"},
		{"CodeDeploy", codedeploy.NewFromConfig(cfg).Options().BaseEndpoint, "http://127.0.0.1:4004"},
	} {
		if aws.ToString(c.got) != c.want {
			t.Errorf("%s endpoint %q; want %q", c.service, aws.ToString(c.got), c.want)
		}
	}
}

// AWS_ENDPOINT_URL serves every service without its own variable, and
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS turns all of them off.
func TestLoadGlobalEndpointAndIgnore(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"AWS_REGION":           localaws.Region,
		"AWS_ENDPOINT_URL":     "http://127.0.0.1:1111",
		"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:2222",
	}
	cfg := awsenv.Load(env(vars))
	if got := aws.ToString(sesv2.NewFromConfig(cfg).Options().BaseEndpoint); got != "http://127.0.0.1:1111" {
		t.Errorf("SESv2 endpoint %q; want AWS_ENDPOINT_URL's", got)
	}
	if got := aws.ToString(sqs.NewFromConfig(cfg).Options().BaseEndpoint); got != "http://127.0.0.1:2222" {
		t.Errorf("SQS endpoint %q; want AWS_ENDPOINT_URL_SQS's", got)
	}

	vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "true"
	cfg = awsenv.Load(env(vars))
	for service, got := range map[string]*string{
		"SQS":   sqs.NewFromConfig(cfg).Options().BaseEndpoint,
		"SESv2": sesv2.NewFromConfig(cfg).Options().BaseEndpoint,
	} {
		if got != nil {
			t.Errorf("%s endpoint %q with AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true; want AWS's own", service, *got)
		}
	}
}

func TestEndpointVariable(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"SQS":             "AWS_ENDPOINT_URL_SQS",
		"SESv2":           "AWS_ENDPOINT_URL_SESV2",
		"Secrets Manager": "AWS_ENDPOINT_URL_SECRETS_MANAGER",
	} {
		if got := awsenv.EndpointVariable(id); got != want {
			t.Errorf("EndpointVariable(%q) = %q; want %q", id, got, want)
		}
	}
}

// Load reads every variable it may use, whatever their values, and
// nothing afterwards: making a client of each service the functions call
// reads nothing more, so a recording getenv handed to a function's
// settings loader sees all the names it uses, and wiring gets values.
func TestLoadReadsEverythingAtOnce(t *testing.T) {
	t.Parallel()
	for _, vars := range []map[string]string{
		nil,
		{"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:1111", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"},
	} {
		read := map[string]bool{}
		loading := true
		cfg := awsenv.Load(func(k string) string {
			if !loading {
				t.Errorf("%s read after Load returned", k)
			}
			read[k] = true
			return vars[k]
		})
		loading = false
		sqs.NewFromConfig(cfg)
		sesv2.NewFromConfig(cfg)
		secretsmanager.NewFromConfig(cfg)
		lambda.NewFromConfig(cfg)
		codedeploy.NewFromConfig(cfg)

		want := []string{awsenv.EnvRegion, awsenv.EnvDefaultRegion, awsenv.EnvAccessKeyID, awsenv.EnvSecretAccessKey,
			awsenv.EnvSessionToken, awsenv.EnvEndpointURL, awsenv.EnvIgnoreConfiguredEndpointURLs}
		for _, id := range awsenv.Services {
			want = append(want, awsenv.EndpointVariable(id))
		}
		for _, k := range want {
			if !read[k] {
				t.Errorf("with %v: Load did not read %s", vars, k)
			}
		}
		if len(read) != len(want) {
			t.Errorf("with %v: Load read %d variables, want %d (%v)", vars, len(read), len(want), want)
		}
	}
}

// Services names, in the SDK's own spelling, every service a function
// calls: a misspelt id would leave that service's endpoint variable unread.
func TestServicesAreTheSDKsIDs(t *testing.T) {
	t.Parallel()
	want := []string{sqs.ServiceID, sesv2.ServiceID, secretsmanager.ServiceID, lambda.ServiceID, codedeploy.ServiceID}
	if fmt.Sprint(awsenv.Services) != fmt.Sprint(want) {
		t.Errorf("Services = %q; want %q", awsenv.Services, want)
	}
}
