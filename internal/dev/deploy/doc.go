// Package deploy checks the deployment description: template.yaml (AWS SAM),
// samconfig.toml, the Makefile targets that `sam build` calls, and the
// sample events in events/. It has no code of its own, only tests, and they
// need no AWS account.
//
// What AWS deploys is read through AWS's own tools, driven by
// .ci/cfn/samtool.py (samtool_test.go runs it, with the python `make test`
// passes as JOBBOARD_PYTHON): the template as aws-sam-translator translates
// it, for every parameter set (the template's defaults and each
// samconfig.toml environment), and a deploy rehearsal of that translation
// in moto's CloudFormation, whose custom resource (SchemaMigration) runs
// the migration function under aws-lambda-rie against an empty database:
//
//   - translation_test.go: no dependency cycle (references in UpdatePolicy
//     counted; cfn-lint refuses the cycle too), CORS an object, each
//     function's rollback alarms reading its new version, the rehearsal's
//     CREATE_COMPLETE, samconfig.toml's placeholders refused by the
//     parameter checks;
//   - rehearsal_test.go: what the rehearsal created: the roles and their
//     policies (least privilege, no SAM-made roles), secrets only as ARNs,
//     each function's settings (reserved concurrency, query mode, TLS, VPC,
//     the hook's versions), the queues' TLS policy, the sweeper's async
//     invocation settings;
//   - connections_test.go: the connection arithmetic of every parameter set
//     against the database's share, and the API's timeouts;
//   - loglevel_test.go: a metric line survives every allowed LogLevel;
//   - versions_test.go: a change of each parameter where the deploys keep
//     it (samconfig.toml) publishes a new version of exactly the functions
//     whose configuration it changes, through the settings' digest the
//     build writes into each artifact (package settings), and the same
//     inputs give the same versions;
//   - feedbacktopic_test.go: only SES, for this stack's configuration set,
//     may publish to the feedback topic;
//   - schemamigration_test.go: the custom resource SchemaMigration: in the
//     translation, the API, the worker and the sweeper wait for it, and a
//     deploy that changes only a migration updates it; in the rehearsal,
//     moto's Create reaches the migration function and only its answer
//     completes the stack; and under aws-lambda-rie, with a local server in
//     place of the pre-signed answer URL, Create and Update migrate, a
//     failing migration answers FAILED, Delete changes nothing.
//
// The rest reads the YAML itself, where it says what the translation
// cannot (that a value is a parameter, SAM's own properties, comments and
// build metadata):
//
//   - template_test.go parses template.yaml (goformation plus small structs
//     for what goformation lacks) and checks the numbers from AWS's guidance
//     (visibility timeout, maxReceiveCount, DLQ retention and redrive
//     policy, ReportBatchItemFailures);
//   - schema_test.go validates Globals and every AWS::Serverless::* resource
//     against SAM's own JSON schema (testdata/sam.schema.json);
//   - samconfig_test.go checks that each samconfig.toml environment sets
//     the parameters the template declares (and only those);
//   - makefile_test.go checks that every function has a build-<LogicalId>
//     target producing a linux/arm64 bootstrap, and that `make migrate`
//     exists; reproducible_test.go builds the artifacts from two commits
//     that differ outside the code and compares them byte for byte;
//   - canary_test.go checks that a gradual deployment outlasts its
//     rollback alarms;
//   - operations_test.go checks the RDS Proxy, an alarm for every failure,
//     gradual deploys through the PreTraffic hook, the VPC endpoints and
//     the NAT rule, CORS, and sam build in the source folder;
//   - env_test.go checks that every environment variable a function's
//     settings loader (functions/<name>/settings) asks a recording getenv
//     for is set for it in the template, and the reverse;
//   - events_test.go checks that the sample events look exactly like the
//     events Lambda delivers;
//   - rie_test.go runs each function's bootstrap under aws-lambda-rie (the
//     emulator inside `sam local invoke`), with PostgreSQL and the local SQS
//     and SES stand-ins, invokes it with the samples, and follows a status
//     change from the API through SQS to the worker's email; hook_test.go
//     runs the PreTraffic hook there against the migration function and the
//     API, with local stand-ins for Lambda's invoke front and CodeDeploy,
//     and checks what CodeDeploy is told; both check that the metrics the
//     rollback alarms read are written with the version dimension;
//   - coldstart_test.go holds each function's Lambda artifact to the size
//     aim, and BenchmarkColdStart (`make coldstart`) measures cold starts
//     under the emulator against hello-world baselines (testdata/hello,
//     testdata/hellodb) and the worker against its floor
//     (testdata/workerfloor).
package deploy
