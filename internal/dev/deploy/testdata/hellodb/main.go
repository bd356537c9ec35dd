// Command hellodb is hello (the smallest Go Lambda function) plus what every
// function of the job board does at init and hello does not: it opens a
// pgx pool on DATABASE_URL and pings it, so that the first request finds a
// connection. The cold-start benchmark uses it as a second baseline, to
// tell the functions' own start-up cost from the database's.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(func(context.Context, map[string]any) (string, error) { return "hello", nil })
}
