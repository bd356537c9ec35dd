package pretraffichook

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/codedeploy"
	codedeploytypes "github.com/aws/aws-sdk-go-v2/service/codedeploy/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// CodeDeploy reports with codedeploy:PutLifecycleEventHookExecutionStatus.
type CodeDeploy struct {
	Client *codedeploy.Client
}

var _ Reporter = CodeDeploy{}

// ReportHook implements Reporter. It returns the SDK's error.
func (c CodeDeploy) ReportHook(ctx context.Context, deploymentID, executionID, status string) error {
	_, err := c.Client.PutLifecycleEventHookExecutionStatus(ctx, &codedeploy.PutLifecycleEventHookExecutionStatusInput{
		DeploymentId:                  &deploymentID,
		LifecycleEventHookExecutionId: &executionID,
		Status:                        codedeploytypes.LifecycleEventStatus(status),
	})
	return err
}

// Lambda invokes one function (a version's ARN) synchronously.
type Lambda struct {
	Client       *lambda.Client
	FunctionName string
}

var _ Invoker = Lambda{}

// errFunction is a function error: the invocation ran and failed.
var errFunction = errors.New("function error")

// Invoke implements Invoker. Errors: the SDK's, or a function error with
// the start of its payload.
func (l Lambda) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := l.Client.Invoke(ctx, &lambda.InvokeInput{FunctionName: &l.FunctionName, Payload: payload})
	if err != nil {
		return nil, err
	}
	if out.FunctionError != nil {
		return nil, fmt.Errorf("%w %s: %.300s", errFunction, *out.FunctionError, out.Payload)
	}
	return out.Payload, nil
}

// Invoked is a step that invokes fn with an empty event and succeeds when
// the invocation does (the migration function's).
func Invoked(fn Invoker) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := fn.Invoke(ctx, []byte("{}"))
		return err
	}
}
