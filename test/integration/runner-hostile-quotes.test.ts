import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner, type RunCall } from "../support/runner";

/**
 * What the host quotes of a runner's words is scrubbed of the run's secrets (./runner-quoted-secrets.test.ts), and
 * only what it quotes: a line is read whole but quoted by its start and the parser's window, a run id or a result type
 * by its head. A runner sending a megabyte in which every other character is a one-character secret (a PIN) costs no
 * more than that head to scrub, and the parser's words are about the line as sent, not the one the scrub would make.
 */
const API_KEY = "hostile-quote-key-4c2e9b1d";
/** A secret of one character, in none of the other texts here (tokens are base64url; "~" is not in them either). */
const PIN = "!";
/** Just under RUNNER_MAX_LINE_BYTES (1 MiB): every other character the PIN. */
const HOSTILE = "~!".repeat(512 * 1024 - 4);
/** Half as much, as a field of a line. */
const HOSTILE_FIELD = HOSTILE.slice(0, 512 * 1024);

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

function send(res: ServerResponse, lines: (string | Record<string, unknown>)[]) {
  res.writeHead(200, { "content-type": "application/x-ndjson" });
  res.end(lines.map((line) => `${typeof line === "string" ? line : JSON.stringify(line)}\n`).join(""));
}

function answer({ body }: RunCall, res: ServerResponse) {
  const runId: string = body.context.run_id;
  const done = { run_id: runId, type: "run.completed", data: { finish_reason: "stop", message: { role: "assistant", content: "done" } } };
  switch (body.context.input.text) {
    case "hostile-line":
      return send(res, [HOSTILE]);
    case "secret-before-fault":
      // Valid up to its end, then more: the parser stops at 16 of the line as sent (22 of it with the PIN scrubbed).
      return send(res, [`{"pin": "${body.context.config.pin}"} and more`]);
    case "hostile-run-id":
      return send(res, [{ ...done, run_id: HOSTILE_FIELD }]);
    case "secret-types":
      return send(res, [{ run_id: runId, type: `debug ${API_KEY}`, data: {} }, { run_id: runId, type: HOSTILE_FIELD, data: {} }, done]);
  }
  res.writeHead(400).end();
}

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "hostile-quotes",
    runners: [{ name: "default", label: { en_US: "hostile" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" } }, { name: "pin", type: "secret", label: { en_US: "PIN" } }] }],
    onRun: answer,
  });
  host = await startTestHost();
  await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function runOf(agentId: string, text: string, pin = PIN) {
  const agent = { agent_id: agentId, name: agentId, runner_id: runner.runnerId(), runner_config: { api_key: API_KEY, pin }, event_types: ["message.received"], scope: { type: "conversation", id: agentId } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
  return host.waitForRun((await host.postEvent(messageEvent(agentId, text))).body.run_id!);
}

const marked = (times: number) => `~[redacted]`.repeat(times);

describe("a runner's hostile words, quoted", () => {
  it("a megabyte line that is not JSON, a secret every other character: its start and the parser's window, scrubbed", async () => {
    const run = await runOf("hostile-line", "hostile-line");
    expect(run.error?.code).toBe("runner.protocol_error");
    // The parser stopped at the line's first character; its window (10 characters, cut from the line) is quoted
    // scrubbed, and the character it names only when nothing in the window was a secret.
    expect(run.error?.message).toBe(`result line is not JSON (Unexpected token, "${marked(5)}"... is not valid JSON): ${marked(7)}~[r`);
  });

  it("the parser's words name the line as sent, not as scrubbed", async () => {
    const run = await runOf("secret-before-fault", "secret-before-fault", "k9Z3");
    expect(run.error?.message).toBe('result line is not JSON (Unexpected non-whitespace character after JSON at position 16 (line 1 column 17)): {"pin": "[redacted]"} and more');
  });

  it("a run id of half a megabyte is quoted by its head", async () => {
    const run = await runOf("hostile-run-id", "hostile-run-id");
    expect(run.error?.code).toBe("runner.protocol_error");
    expect(run.error?.message).toBe(`result names run ${marked(18)}~[, not this run`);
  });

  it("an unknown result type is quoted scrubbed in its warning, a long one by its head", async () => {
    const run = await runOf("secret-types", "secret-types");
    expect(run.status).toBe("completed");
    const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items as { origin: string; data: { code?: string; message?: string } }[];
    const warned = ledger.filter((e) => e.origin === "host" && e.data.code === "result.unknown_type").map((e) => e.data.message);
    expect(warned).toEqual(["unknown result type debug [redacted] ignored", `unknown result type ${marked(18)}~[… ignored`]);
  });
});
