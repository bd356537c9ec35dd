# jobboard: see README.md. `make dev` runs the system locally, `make test`
# runs lint and every test against a real PostgreSQL.
SHELL := bash
GO    ?= go

# The Go toolchain of go.mod's toolchain line, for every go command make runs
# (the Lambda builds, the tests, the linters): the go command downloads it
# through the module proxy once, whatever Go the machine has.
GO_TOOLCHAIN := $(shell sed -n 's/^toolchain //p' go.mod)
export GOTOOLCHAIN := $(GO_TOOLCHAIN)

# Tools are pinned and built once per machine, outside the clone, so CI's
# fresh clones reuse them.
TOOLS_DIR             ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/jobboard-tools
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT         := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# The Lambda Runtime Interface Emulator (what `sam local invoke` runs inside its
# container): internal/dev/deploy runs every function under it, `make invoke` too.
AWS_LAMBDA_RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
AWS_LAMBDA_RIE         := $(TOOLS_DIR)/aws-lambda-rie-$(AWS_LAMBDA_RIE_VERSION)

# The npm stand-ins for SQS and SES (see .ci/localaws/package.json).
LOCALAWS := .ci/localaws/node_modules/.package-lock.json

# The specification's own verifier of webhook signatures (npm
# standardwebhooks), pinned in .ci/webhooks: the receiver tests of
# internal/webhook check every delivery with it.
WEBHOOK_VERIFIER := .ci/webhooks/node_modules/.package-lock.json

# Redocly CLI, the OpenAPI linter, and Stoplight Prism, the validating proxy
# that the contract tests run every response past (internal/httpapi/
# openapitest), pinned in .ci/openapi (package.json, lock).
OPENAPI_LINT := .ci/openapi/node_modules/.package-lock.json
REDOCLY      := REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true .ci/openapi/node_modules/.bin/redocly

WITH_PG := .ci/with-postgres.sh

# AWS's own template tools (cfn-lint, aws-sam-translator, moto), pinned in
# .ci/cfn/requirements.txt: pytools.sh prints a python that has exactly
# those versions, the machine's python3 when it does, else a virtual
# environment it makes once in the tools cache. samtool.py drives them
# (cfn-lint in `make lint`; the translated-template tests and the moto
# deploy rehearsal in internal/dev/deploy, which find it at $JOBBOARD_PYTHON).
PYTOOLS := TOOLS_DIR=$(TOOLS_DIR) .ci/cfn/pytools.sh
SAMTOOL := .ci/cfn/samtool.py

# govulncheck, pinned, and the vulnerability database it falls back on when
# the public one cannot be reached: built from a pinned golang.org/x/vulndb
# module (its OSV files, indexed by the module's own cmd/indexdb). See
# docs/security.md, "Known vulnerabilities".
GOVULNCHECK_VERSION := v1.9.0
GOVULNCHECK         := $(TOOLS_DIR)/govulncheck-$(GOVULNCHECK_VERSION)
VULNDB_VERSION      := v0.0.0-20261105234957-e22db6528018
VULNDB              := $(TOOLS_DIR)/vulndb-$(VULNDB_VERSION)

# Lambda builds: provided.al2023 on arm64, one static bootstrap per function.
# The same code gives the same bytes wherever it is built: no paths
# (-trimpath), no version-control stamp (-buildvcs=false: a commit that
# changes only a document would otherwise change every binary, and so
# publish a new version of every function), no symbol table. `sam deploy`
# names the uploaded artifact after its contents, and SAM names a
# function's version after that name.
ARTIFACTS_DIR ?= build
LAMBDA_GOFLAGS := GOTOOLCHAIN=$(GO_TOOLCHAIN) CGO_ENABLED=0 GOOS=linux GOARCH=arm64
LAMBDA_BUILD   = $(LAMBDA_GOFLAGS) $(GO) build -tags lambda.norpc -trimpath -buildvcs=false -ldflags='-s -w' -o $(ARTIFACTS_DIR)/bootstrap
# Beside each bootstrap, the digest of the function's settings in every
# parameter set of template.yaml and samconfig.toml: a deploy that changes
# a function's settings changes its artifact, and so publishes a new
# version of that function alone (see internal/dev/deploy/settings).
SETTINGS_DIGEST = $(GO) run ./internal/dev/cmd/settingsdigest -o $(ARTIFACTS_DIR)/settings.sha256 -function

.PHONY: dev test lint pytools bench coldstart fuzz migrate build localaws rie invoke poison chaos vuln vuln-pinned
.PHONY: build-ApiFunction build-WorkerFunction build-SweeperFunction build-WebhookFunction build-FeedbackFunction build-MigrateFunction build-PreTrafficHookFunction

# `make dev`, `make invoke` and the emulator tests build the functions for
# this machine with the same flags (those of the Lambda builds, less the
# target), so that they share the Go build cache: after the first build only
# the link is redone.
DEV_BUILD := CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath
# Where `make dev` describes the running stack for `make invoke` and `make
# poison` (its URLs, the functions' environment, the demo accounts).
DEV_STATE  ?= build/dev/stack.json
INVOKE_DIR ?= build/invoke

## dev: the whole system on this machine (see internal/dev/devstack): PostgreSQL,
## the SQS and SES stand-ins, the API on 127.0.0.1:8080, the worker and the
## webhook delivery function polling their queues, the sweeper on a timer,
## and a seeded demo. Ctrl-C stops it.
## PORT, SQS_PORT, SES_PORT (0: a free port) and DEV_DATABASE move it.
dev: $(LOCALAWS)
	$(DEV_BUILD) -o build/dev/ ./functions/api ./functions/worker ./functions/sweeper ./functions/webhook ./functions/feedback ./internal/dev/cmd/dev
	$(WITH_PG) build/dev/dev -bin build/dev -state $(DEV_STATE)

## chaos: the email promise under faults (see internal/dev/chaos): the whole
## stack on free ports, thousands of status changes while processes die and
## freeze and SQS and SES fail, then a report of lost and duplicated emails;
## then the webhook promise, while receivers die, stall and fail and the
## delivery functions die and freeze. CHAOS_FLAGS passes flags, e.g.
## CHAOS_FLAGS='-seed 42', '-short' or '-only webhooks'.
chaos: $(LOCALAWS)
	$(GO) build -o build/chaos/ ./functions/api ./functions/worker ./functions/sweeper ./functions/webhook ./functions/feedback ./internal/dev/cmd/chaos
	$(WITH_PG) build/chaos/chaos -bin build/chaos $(CHAOS_FLAGS)

## test: lint, govulncheck against the pinned vulnerability database (the
## same verdict for the same commit on any day; `make vuln` asks the live
## one), then every test with the race detector and, beside it, the store's
## tests again in the query exec mode that RDS Proxy needs
## (PROXY_QUERY_EXEC_MODE, see docs/performance.md), where a connection left
## holding a named prepared statement fails its test. The second pass waits
## on PostgreSQL rather than the CPU, so it runs alongside the first (its
## output follows). Packages run four at a time, twice the cores of a small
## machine: the longest (internal/dev/...) mostly wait on the processes they
## start, and two of them at a time held both of -p 2's slots while nothing
## else built or ran (see docs/development.md, "What make test costs").
PROXY_QUERY_EXEC_MODE ?= exec
TEST_EXEC_LOG         := build/test-$(PROXY_QUERY_EXEC_MODE)-mode.log
test: lint vuln-pinned $(LOCALAWS) $(WEBHOOK_VERIFIER) $(AWS_LAMBDA_RIE)
	mkdir -p build
	JOBBOARD_PYTHON=$$($(PYTOOLS)) && export JOBBOARD_PYTHON && \
	AWS_LAMBDA_RIE=$(AWS_LAMBDA_RIE) $(WITH_PG) bash -c ' \
		TEST_DATABASE_QUERY_EXEC_MODE=$(PROXY_QUERY_EXEC_MODE) $(GO) test -race -count=1 ./internal/postgres/... >$(TEST_EXEC_LOG) 2>&1 & store=$$!; \
		$(GO) test -race -count=1 -p 4 -timeout 30m ./...; all=$$?; \
		wait $$store; again=$$?; \
		echo "== the store again, in $(PROXY_QUERY_EXEC_MODE) mode:"; cat $(TEST_EXEC_LOG); \
		[ $$all = 0 ] && [ $$again = 0 ]'

## vuln: govulncheck over every package against the public vulnerability
## database, or the pinned one when the public one cannot be reached; fails
## on a vulnerability the code calls. Run it daily and before each deploy.
vuln: $(GOVULNCHECK) $(VULNDB)
	.ci/vuln $(GOVULNCHECK) $(VULNDB)

## vuln-pinned: the same against the pinned database only (make test).
vuln-pinned: $(GOVULNCHECK) $(VULNDB)
	.ci/vuln -pinned $(GOVULNCHECK) $(VULNDB)

$(GOVULNCHECK):
	mkdir -p $(TOOLS_DIR)/tmp
	GOBIN=$(TOOLS_DIR)/tmp $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
	mv $(TOOLS_DIR)/tmp/govulncheck $@

# The database: the module's OSV files indexed into the layout govulncheck
# reads with -db file://DIR. Built in a temporary folder, then moved, so that
# an interrupted build is not taken for a database.
$(VULNDB):
	mkdir -p $(TOOLS_DIR)/tmp
	GOBIN=$(TOOLS_DIR)/tmp $(GO) install golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION)
	cd $(TOOLS_DIR) && $(GO) mod download golang.org/x/vulndb@$(VULNDB_VERSION)
	rm -rf $@.tmp
	$(TOOLS_DIR)/tmp/indexdb -vulns "$$($(GO) env GOMODCACHE)/golang.org/x/vulndb@$(VULNDB_VERSION)/data/osv" -out $@.tmp
	mv $@.tmp $@

## lint: gofmt, go vet, golangci-lint (pinned), Redocly's recommended
## rules over the OpenAPI document (errors fail; warnings are printed), and
## cfn-lint over template.yaml for the template's defaults and every
## samconfig.toml environment (any finding fails, informational ones too).
lint: $(GOLANGCI_LINT) $(OPENAPI_LINT)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go') 2>&1); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...
	$(REDOCLY) lint --config .ci/openapi/redocly.yaml --format=summary internal/httpapi/openapi.json
	py=$$($(PYTOOLS)) && $$py $(SAMTOOL) lint

## pytools: print the python with the pinned template tools (installing them
## into the tools cache when the machine's python3 lacks them).
pytools:
	@$(PYTOOLS)

$(OPENAPI_LINT): .ci/openapi/package.json .ci/openapi/package-lock.json
	npm ci --prefix .ci/openapi --no-audit --no-fund --loglevel=error

$(GOLANGCI_LINT):
	mkdir -p $(TOOLS_DIR)/tmp
	GOBIN=$(TOOLS_DIR)/tmp $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_DIR)/tmp/golangci-lint $@

## bench: the benchmarks, reported as ratios against baselines of the same run;
## among them the API over loopback HTTP against a bare net/http + pgx peer
## (BenchmarkHTTPVsBare, in functions/api), in pgx's default mode and in exec,
## the mode for RDS Proxy. See docs/performance.md.
bench: $(LOCALAWS) $(AWS_LAMBDA_RIE)
	AWS_LAMBDA_RIE=$(AWS_LAMBDA_RIE) $(WITH_PG) $(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

## coldstart: each function's cold start under aws-lambda-rie next to two
## hello-world baselines, and the worker's next to its floor
## (COLDSTART_ROUNDS rounds, medians and ratios), and the size of each
## Lambda artifact; see docs/performance.md.
COLDSTART_ROUNDS ?= 20
coldstart: $(LOCALAWS) $(AWS_LAMBDA_RIE)
	AWS_LAMBDA_RIE=$(AWS_LAMBDA_RIE) $(WITH_PG) $(GO) test -count=1 -v -run '^TestBootstrapsFitTheSizeAim$$' \
		-bench '^BenchmarkColdStart$$' -benchtime $(COLDSTART_ROUNDS)x ./internal/dev/deploy

## fuzz: every fuzz target (func FuzzX in a _test.go file) for FUZZTIME
## each, one after the other, e.g. `make fuzz FUZZTIME=30s`. Their seed
## corpora (testdata/fuzz) also run as ordinary tests in `make test`; new
## failing inputs land there too, to be kept as regression seeds.
FUZZTIME ?= 30s
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' internal functions | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | cut -c6-); do \
			echo "== $$dir $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) ./$$dir; \
		done; \
	done

$(WEBHOOK_VERIFIER): .ci/webhooks/package.json .ci/webhooks/package-lock.json
	npm ci --prefix .ci/webhooks --no-audit --no-fund --loglevel=error

## rie: the pinned Lambda Runtime Interface Emulator.
rie: $(AWS_LAMBDA_RIE)
$(AWS_LAMBDA_RIE):
	mkdir -p $(TOOLS_DIR)/tmp
	GOBIN=$(TOOLS_DIR)/tmp $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(AWS_LAMBDA_RIE_VERSION)
	mv $(TOOLS_DIR)/tmp/aws-lambda-rie $@

## invoke: run one function under aws-lambda-rie with one sample event, against
## the running `make dev` (like `sam local invoke FUNCTION -e EVENT`), e.g.
##   make invoke FUNCTION=WorkerFunction EVENT=events/sqs-status-event.json
## The event's tokens are the demo accounts'; see internal/dev/cmd/devloop.
FUNCTION_DIR = $(shell echo '$(FUNCTION)' | sed 's/Function$$//' | tr '[:upper:]' '[:lower:]')
invoke: $(AWS_LAMBDA_RIE)
	@[ -n "$(FUNCTION)" ] && [ -n "$(EVENT)" ] || { echo 'usage: make invoke FUNCTION=WorkerFunction EVENT=events/sqs-status-event.json' >&2; exit 2; }
	$(DEV_BUILD) -o $(INVOKE_DIR)/ ./internal/dev/cmd/devloop ./functions/$(FUNCTION_DIR)
	$(INVOKE_DIR)/devloop invoke -state $(DEV_STATE) -rie $(AWS_LAMBDA_RIE) -bootstrap $(INVOKE_DIR)/$(FUNCTION_DIR) $(FUNCTION) $(EVENT)

## poison: put a message that is not an event on the running `make dev`'s
## queue and watch it reach the dead-letter queue (seconds; see
## docs/development.md).
poison:
	$(DEV_BUILD) -o $(INVOKE_DIR)/ ./internal/dev/cmd/devloop
	$(INVOKE_DIR)/devloop poison -state $(DEV_STATE)

## migrate: apply the schema migrations to the database at DATABASE_URL (or
## DATABASE_SECRET_ARN's); see internal/dev/cmd/migrate. Deploys migrate by
## themselves, the first one included (MigrateFunction, run by the custom
## resource SchemaMigration and again by the PreTraffic hook).
migrate:
	$(GO) run ./internal/dev/cmd/migrate

## localaws: install the SQS and SES stand-ins used by tests and `make dev`.
localaws: $(LOCALAWS)
$(LOCALAWS): .ci/localaws/package.json .ci/localaws/package-lock.json
	npm ci --prefix .ci/localaws --no-audit --no-fund --loglevel=error

## build: every Lambda's bootstrap into build/<function>/, without SAM.
build:
	$(MAKE) build-ApiFunction ARTIFACTS_DIR=build/api
	$(MAKE) build-WorkerFunction ARTIFACTS_DIR=build/worker
	$(MAKE) build-SweeperFunction ARTIFACTS_DIR=build/sweeper
	$(MAKE) build-WebhookFunction ARTIFACTS_DIR=build/webhook
	$(MAKE) build-FeedbackFunction ARTIFACTS_DIR=build/feedback
	$(MAKE) build-MigrateFunction ARTIFACTS_DIR=build/migrate
	$(MAKE) build-PreTrafficHookFunction ARTIFACTS_DIR=build/pretraffichook

# The RDS CA bundle, when it is in the project, ships beside each bootstrap
# (/var/task/rds-global-bundle.pem on Lambda) for DatabaseSslRootCert; see
# docs/deploying.md, "Before the first deploy".
RDS_CA_BUNDLE := certs/rds-global-bundle.pem
COPY_CA_BUNDLE = $(if $(wildcard $(RDS_CA_BUNDLE)),cp $(RDS_CA_BUNDLE) $(ARTIFACTS_DIR)/)

# build-<LogicalId>: what `sam build` calls (BuildMethod: makefile), in the
# project folder (build_in_source in samconfig.toml); they write only into
# $(ARTIFACTS_DIR): the bootstrap, the settings' digest and the CA bundle.
build-ApiFunction:
	$(LAMBDA_BUILD) ./functions/api
	$(SETTINGS_DIGEST) ApiFunction
	$(COPY_CA_BUNDLE)
build-WorkerFunction:
	$(LAMBDA_BUILD) ./functions/worker
	$(SETTINGS_DIGEST) WorkerFunction
	$(COPY_CA_BUNDLE)
build-SweeperFunction:
	$(LAMBDA_BUILD) ./functions/sweeper
	$(SETTINGS_DIGEST) SweeperFunction
	$(COPY_CA_BUNDLE)
build-WebhookFunction:
	$(LAMBDA_BUILD) ./functions/webhook
	$(SETTINGS_DIGEST) WebhookFunction
	$(COPY_CA_BUNDLE)
build-FeedbackFunction:
	$(LAMBDA_BUILD) ./functions/feedback
	$(SETTINGS_DIGEST) FeedbackFunction
	$(COPY_CA_BUNDLE)
build-MigrateFunction:
	$(LAMBDA_BUILD) ./functions/migrate
	$(SETTINGS_DIGEST) MigrateFunction
	$(COPY_CA_BUNDLE)
build-PreTrafficHookFunction:
	$(LAMBDA_BUILD) ./functions/pretraffichook
	$(SETTINGS_DIGEST) PreTrafficHookFunction
	$(COPY_CA_BUNDLE)
