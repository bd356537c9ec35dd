// Command hello is the smallest Go Lambda function: the baseline that the
// cold-start benchmark compares the job board's functions with.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, map[string]any) (string, error) { return "hello", nil })
}
