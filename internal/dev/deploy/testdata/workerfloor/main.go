// Command workerfloor is hellodb plus the AWS clients that the worker
// cannot do without: SES v2 (its emails), SQS (its redelivery backoff) and
// Secrets Manager (its database credentials on AWS), each built from the
// environment as the functions build them. It does nothing else, so its
// init is the least the worker's init can be: the package initialisation
// of those clients, which the SDK generates, and a database connection.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/awsenv"
)

func main() {
	ctx := context.Background()
	cfg := awsenv.Load(os.Getenv)
	// Kept, so that the clients are built as the worker builds them.
	clients := []any{sesv2.NewFromConfig(cfg), sqs.NewFromConfig(cfg), secretsmanager.NewFromConfig(cfg)}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(func(context.Context, map[string]any) (int, error) { return len(clients), nil })
}
