// Package deploy checks the deployment description: template.yaml (AWS SAM),
// samconfig.toml, the Makefile targets that `sam build` calls, and the
// sample events in events/. It has no code of its own, only tests, and they
// need no AWS account:
//
//   - template_test.go parses template.yaml (goformation plus small structs
//     for what goformation lacks) and checks the numbers from AWS's guidance
//     (visibility timeout, maxReceiveCount, DLQ retention and redrive
//     policy, ReportBatchItemFailures), least privilege and secret handling;
//   - schema_test.go validates Globals and every AWS::Serverless::* resource
//     against SAM's own JSON schema (testdata/sam.schema.json);
//   - samconfig_test.go checks that each samconfig.toml environment sets
//     the parameters the template declares (and only those);
//   - makefile_test.go checks that every function has a build-<LogicalId>
//     target producing a linux/arm64 bootstrap, and that `make migrate`
//     exists;
//   - operations_test.go checks the production operations: bounded
//     database connections (reserved concurrency, the RDS Proxy and the
//     arithmetic in docs/deploying.md), an alarm for every failure, gradual
//     deploys with rollback alarms, the VPC endpoints and the NAT rule,
//     CORS, and sam build in the source folder;
//   - env_test.go checks that every environment variable a function's code
//     reads is set for it in the template, and the reverse;
//   - events_test.go checks that the sample events look exactly like the
//     events Lambda delivers;
//   - rie_test.go runs each function's bootstrap under aws-lambda-rie (the
//     emulator inside `sam local invoke`), with PostgreSQL and the local SQS
//     and SES stand-ins, invokes it with the samples, and follows a status
//     change from the API through SQS to the worker's email;
//   - coldstart_test.go holds each function's Lambda artifact to the size
//     aim, and BenchmarkColdStart (`make coldstart`) measures cold starts
//     under the emulator against hello-world baselines (testdata/hello,
//     testdata/hellodb) and the worker against its floor
//     (testdata/workerfloor).
package deploy
