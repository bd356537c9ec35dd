#!/usr/bin/env bash
# invoke.sh FUNCTION EVENT: what `sam local invoke FUNCTION -e EVENT` does,
# without SAM or Docker. It builds the function's bootstrap for this machine,
# runs it under aws-lambda-rie (the emulator inside SAM's container), sends
# the event once, prints the function's answer and stops the emulator.
#
# It talks to the stack of `make dev` (run that first, in another terminal):
# its SQS and SES stand-ins on :4566 and :8005 and its database jobboard_dev.
# Override DATABASE_URL if `make dev` started a throwaway cluster.
set -euo pipefail

function=${1:?usage: invoke.sh FUNCTION EVENT (e.g. WorkerFunction events/sqs-status-event.json)}
event=${2:?usage: invoke.sh FUNCTION EVENT}
rie=${AWS_LAMBDA_RIE:?AWS_LAMBDA_RIE must name the aws-lambda-rie binary (make rie)}
[ -f "$event" ] || { echo "invoke: no event file $event" >&2; exit 2; }

# ApiFunction -> functions/api, WorkerFunction -> functions/worker, ...
dir=$(echo "${function%Function}" | tr '[:upper:]' '[:lower:]')
[ -d "functions/$dir" ] || { echo "invoke: no function $function (functions/$dir)" >&2; exit 2; }

out=$(mktemp -d /tmp/jobboard-invoke.XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -o "$out/bootstrap" "./functions/$dir"

port=9000
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
env \
  DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/jobboard_dev?sslmode=disable}" \
  JWT_SECRET="${JWT_SECRET:-local-invoke-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}" \
  STATUS_EVENTS_QUEUE_URL="${STATUS_EVENTS_QUEUE_URL:-http://127.0.0.1:4566/000000000000/status-events}" \
  MAIL_FROM="${MAIL_FROM:-jobs@jobboard.localhost}" \
  VERIFY_EMAIL_URL="${VERIFY_EMAIL_URL:-http://localhost:3000/verify-email}" \
  AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
  AWS_ENDPOINT_URL_SQS="${AWS_ENDPOINT_URL_SQS:-http://127.0.0.1:4566}" \
  AWS_ENDPOINT_URL_SESV2="${AWS_ENDPOINT_URL_SESV2:-http://127.0.0.1:8005}" \
  AWS_LAMBDA_FUNCTION_NAME="$function" \
  "$rie" --runtime-interface-emulator-address "127.0.0.1:$port" --runtime-api-address "127.0.0.1:$((port + 1000))" \
  "$out/bootstrap" >"$out/log" 2>&1 &
pid=$!

url="http://127.0.0.1:$port/2015-03-31/functions/function/invocations"
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
# The SQS samples' event time is a placeholder: the worker refuses events
# older than the claim retention.
sed "s/{{occurred_at}}/$(date -u +%Y-%m-%dT%H:%M:%SZ)/g" "$event" >"$out/event.json"
curl -sS -XPOST "$url" --data-binary "@$out/event.json"
echo
echo "--- function log ---" >&2
cat "$out/log" >&2
