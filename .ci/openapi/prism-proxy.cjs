// prism-proxy.cjs starts Stoplight Prism as a validating proxy: every answer
// it relays from UPSTREAM is checked against the OpenAPI DOCUMENT, and what
// does not match is listed in the answer's sl-violations header (a JSON
// array whose entries' location starts with "request" or "response").
// Prism is an independent implementation of OpenAPI 3.0 (its own parser
// and JSON Schema validator), so the contract tests run every response
// past it as well as past kin-openapi (internal/httpapi/openapitest).
//
//   node prism-proxy.cjs DOCUMENT UPSTREAM
//
// It listens on a free port of 127.0.0.1 and prints one JSON line,
// {"endpoint":"http://127.0.0.1:PORT"}, once it listens. Requests are not
// validated (the tests send bad ones on purpose) and security is not
// checked (Prism would answer 401 itself instead of relaying); Prism adds
// no CORS fields. It exits on SIGTERM/SIGINT and when its stdin closes, so
// that it cannot outlive the test binary that started it.
"use strict";

// The libraries of the pinned @stoplight/prism-cli, resolved from it (they
// are its dependencies, not this folder's).
const fromCLI = (name) => require(require.resolve(name, { paths: [require.resolve("@stoplight/prism-cli")] }));
const { getHttpOperationsFromSpec } = fromCLI("@stoplight/prism-http");
const { createServer } = fromCLI("@stoplight/prism-http-server");
const { createLogger } = fromCLI("@stoplight/prism-core");

async function main() {
  const [document, upstream] = process.argv.slice(2);
  if (!document || !upstream) {
    throw new Error("usage: node prism-proxy.cjs DOCUMENT UPSTREAM");
  }
  const operations = await getHttpOperationsFromSpec(document);
  const server = createServer(operations, {
    cors: false,
    config: {
      isProxy: true,
      upstream: new URL(upstream),
      validateRequest: false,
      validateResponse: true,
      checkSecurity: false,
      errors: false,
      mock: { dynamic: false },
    },
    components: { logger: createLogger("prism", { level: "silent" }) },
  });
  const endpoint = await server.listen(0, "127.0.0.1");
  process.stdout.write(JSON.stringify({ endpoint }) + "\n");
  const stop = () => process.exit(0);
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  process.stdin.on("end", stop);
  process.stdin.on("close", stop);
  process.stdin.resume();
}

main().catch((err) => {
  console.error("prism-proxy.cjs:", err);
  process.exit(1);
});
