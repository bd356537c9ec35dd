// Command pretraffichook is the PreTraffic hook Lambda of every deploy
// (PreTrafficHookFunction in template.yaml): CodeDeploy invokes it before
// it moves traffic to a new version; it invokes the migration function
// (functions/migrate: the embedded migrations under the advisory lock, as
// `make migrate` applies them), smoke-tests the API's new version by
// invoking it, and reports Succeeded or Failed to CodeDeploy (see
// internal/pretraffichook). Invoked by hand with an empty event (the
// runbook's check of a running stack), it does the same without a report
// and answers with its result.
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset) it runs once, prints the
// result and exits with status 1 when a step failed.
//
// Environment: MIGRATE_FUNCTION_VERSION_ARN and API_FUNCTION_VERSION_ARN
// (required: the versions this deploy published, to migrate with and to
// smoke-test); LOG_LEVEL (debug, info, warn, error; default info). AWS
// settings come from the environment (internal/function, internal/awsenv);
// AWS_ENDPOINT_URL_LAMBDA and AWS_ENDPOINT_URL_CODEDEPLOY point the clients
// at local stand-ins.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/codedeploy"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/jobboard/jobboard/functions/pretraffichook/settings"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/pretraffichook"
)

func main() { function.Main("pretraffichook", run) }

// run is main without the process, which the tests call: the settings,
// then the wiring (see function.Run).
var run = function.Run(settings.Load, wire)

// wire builds the hook from its settings. Outside Lambda it runs once,
// prints its result on stdout and fails when a step did.
func wire(_ context.Context, s settings.Settings, stdout io.Writer) (*function.Wiring, error) {
	lambdaClient := awslambda.NewFromConfig(s.AWS)
	hook, err := pretraffichook.New(pretraffichook.Config{
		Migrate:  pretraffichook.Invoked(pretraffichook.Lambda{Client: lambdaClient, FunctionName: s.MigrateVersionARN}),
		API:      pretraffichook.Lambda{Client: lambdaClient, FunctionName: s.APIVersionARN},
		Reporter: pretraffichook.CodeDeploy{Client: codedeploy.NewFromConfig(s.AWS)},
		Logger:   s.Logger(stdout),
	})
	if err != nil {
		return nil, err
	}
	return &function.Wiring{
		Handler: hook.Handle,
		Local: func(ctx context.Context) error {
			res, err := hook.Handle(ctx, pretraffichook.Event{})
			out, _ := json.Marshal(res)
			fmt.Fprintln(stdout, string(out))
			return err
		},
	}, nil
}
