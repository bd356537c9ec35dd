// verify.mjs checks Standard Webhooks signatures with the specification's
// own JavaScript library (the npm package standardwebhooks): an
// implementation that shares no code with ours, for the receiver tests of
// internal/webhook.
//
// It reads one JSON object a line on stdin,
//   {"secret": "whsec_…", "headers": {"webhook-id": …}, "body": "…"}
// and answers one line on stdout for each, in order,
//   {"ok": true} or {"ok": false, "error": "…"}
// The library also refuses a webhook-timestamp more than five minutes from
// this machine's clock. It exits when stdin closes.
import { createRequire } from "node:module";
import { createInterface } from "node:readline";

const require = createRequire(import.meta.url);
const { Webhook } = require("standardwebhooks");

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === "") continue;
  let answer;
  try {
    const { secret, headers, body } = JSON.parse(line);
    new Webhook(secret).verify(body, headers);
    answer = { ok: true };
  } catch (err) {
    answer = { ok: false, error: String(err && err.message ? err.message : err) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
