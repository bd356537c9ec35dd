// launch.mjs starts one local AWS stand-in bound to the loopback interface
// (the packages' own CLIs bind every interface) and prints one JSON line,
// {"service":"sqs","endpoint":"http://127.0.0.1:PORT"}, once it listens.
//
//   node launch.mjs sqs [PORT]   fauxqs (SQS), health: GET /health
//   node launch.mjs ses [PORT]   aws-ses-v2-local (SES v2), health: GET /health-check
//
// PORT 0 or absent picks a free port. The process exits on SIGTERM/SIGINT and
// when its stdin closes, so a stand-in started by a Go test cannot outlive the
// test binary even if that binary is killed. Used by internal/dev/localaws.
import { createRequire } from "node:module";

const host = "127.0.0.1";
const [service, portArg = "0"] = process.argv.slice(2);
const port = Number.parseInt(portArg, 10);

async function start() {
  switch (service) {
    case "sqs": {
      const { buildApp } = await import("fauxqs");
      const app = buildApp({ logger: false });
      await app.listen({ port, host });
      return { port: app.server.address().port, close: () => app.close() };
    }
    case "ses": {
      const require = createRequire(import.meta.url);
      const startSES = require("aws-ses-v2-local").default;
      const server = await startSES({ host, port });
      // Its listen callback swallows errors: a busy port leaves it closed.
      if (!server.listening) {
        throw new Error(`not listening on ${host}:${port} (port in use?)`);
      }
      return {
        port: server.address().port,
        close: () => new Promise((resolve) => server.close(resolve)),
      };
    }
    default:
      throw new Error(`unknown service ${JSON.stringify(service)}: want sqs or ses`);
  }
}

if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`launch.mjs: bad port ${JSON.stringify(portArg)}`);
  process.exit(2);
}

let server;
try {
  server = await start();
} catch (err) {
  console.error(`launch.mjs: cannot start ${service}:`, err);
  process.exit(1);
}

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  const forced = setTimeout(() => process.exit(0), 2000);
  forced.unref();
  try {
    await server.close();
  } finally {
    process.exit(0);
  }
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.stdin.on("end", stop);
process.stdin.on("error", stop);
process.stdin.resume();

console.log(JSON.stringify({ service, endpoint: `http://${host}:${server.port}` }));
