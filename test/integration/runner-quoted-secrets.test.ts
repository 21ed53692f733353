import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner, type RunCall } from "../support/runner";
import { expectSecretsKeptOut } from "../support/secrets-kept-out";

/**
 * A run's error quotes its runner's words (an error body's start, a line that is not JSON, a run id it named). A
 * runner may quote back what its request carried: a web framework's 422 echoes the field it refused (FastAPI's
 * `input`), a debug print lands in the stream. The host quotes none of the request's secrets (the agent's secret
 * runner_config values, the run's token) into the run's error, its ledger, EventLog or its log: later runs of the
 * conversation, whatever their runner, read EventLog (event.page), and no view shows a secret field's value.
 */
const API_KEY = "agent-config-secret-5f1e9a7c";
/** Longer than what is left of the 512 bytes read of an error body after its opening: only its head is read. */
const LONG_KEY = `long-secret-${"k7Q2".repeat(20)}`;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const tokens: string[] = [];

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

/** What the runner answers, by the message's text. */
function answer({ body }: RunCall, res: ServerResponse) {
  const ctx = body.context;
  const token: string = ctx.runtime.api.token;
  tokens.push(token);
  const key: string = ctx.config.api_key;
  switch (ctx.input.text) {
    case "refused-field":
      // FastAPI's 422 for a field failing its pattern: the field's value, echoed.
      return json(res, 422, { detail: [{ type: "string_pattern_mismatch", loc: ["body", "context", "config", "api_key"], msg: "String should match pattern", input: key }] });
    case "refused-token":
      return json(res, 401, { error: `token ${token} is not one this runner issued` });
    case "cut-secret":
      // Multi-byte text first: the 512 bytes read end inside the key, so only its head is there to quote.
      return json(res, 500, { error: `${"中".repeat(150)} ${key}` });
    case "debug-line":
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(`api_key=${key} token=${token}\n`);
      return;
    case "token-as-run-id":
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(`${JSON.stringify({ run_id: token, type: "run.completed", data: { finish_reason: "stop" } })}\n`);
      return;
  }
  json(res, 400, { error: "unknown case" });
}

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "quoting",
    runners: [{ name: "default", label: { en_US: "quoting" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" } }], permissions: { events: ["page"] } }],
    onRun: answer,
  });
  host = await startTestHost({ captureLogs: true });
  await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function failedRun(agentId: string, key: string, text: string) {
  const agent = { agent_id: agentId, name: agentId, runner_id: runner.runnerId(), runner_config: { api_key: key }, event_types: ["message.received"], scope: { type: "conversation", id: agentId } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
  const posted = await host.postEvent(messageEvent(agentId, text));
  const run = await host.waitForRun(posted.body.run_id!);
  const ledger = await host.admin("GET", `/v1/runs/${run.run_id}/events`);
  const events = await host.admin("GET", `/v1/conversations/events?conversation_id=${agentId}`);
  return { run, answered: [JSON.stringify(run), JSON.stringify(ledger.body), JSON.stringify(events.body)] };
}

describe("a runner quoting its request's secrets back", () => {
  it.each([
    ["refused-field", "runner.http_error", /^runner answered HTTP 422: .*\[redacted\]/],
    ["refused-token", "runner.http_error", /^runner answered HTTP 401: .*token \[redacted\] is not one/],
    ["debug-line", "runner.protocol_error", /^result line is not JSON .*: api_key=\[redacted\] token=\[redacted\]$/],
    ["token-as-run-id", "runner.protocol_error", /^result names run \[redacted\], not this run$/],
  ])("is not quoted in the run's error, ledger, EventLog or log (%s)", async (text, code, shown) => {
    const { run, answered } = await failedRun(`quoting-${text}`, API_KEY, text);
    expect(run.error?.code).toBe(code);
    // Still told what the runner said, the secret aside.
    expect(run.error?.message).toMatch(shown);
    await expectSecretsKeptOut(host, answered, [API_KEY, tokens.at(-1)!]);
  });

  it("nor a value stored before its runner called the field secret (not sealed, masked all the same)", async () => {
    const runners = [{ name: "default", label: { en_US: "late" }, config_schema: [{ name: "api_key", type: "string", label: { en_US: "Key" } }] as Record<string, unknown>[] }];
    const late = await startAdHocRunner({ name: "late-secret", runners, onRun: answer });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: late.url })).body.service.service_id;
      const agent = { agent_id: "late-secret", name: "late-secret", runner_id: late.runnerId(), runner_config: { api_key: API_KEY }, event_types: ["message.received"], scope: { type: "conversation", id: "late-secret" } };
      expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
      runners[0].config_schema[0] = { name: "api_key", type: "secret", label: { en_US: "Key" } };
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
      expect((await host.admin("GET", "/v1/admin/agents/late-secret")).body.runner_config).toEqual({ api_key: "********" });
      const posted = await host.postEvent(messageEvent("late-secret", "refused-field"));
      const run = await host.waitForRun(posted.body.run_id!);
      expect(run.error?.message).toMatch(/^runner answered HTTP 422: .*\[redacted\]/);
      await expectSecretsKeptOut(host, [JSON.stringify(run)], [API_KEY]);
    } finally {
      await late.close();
    }
  });

  it("nor the head of one the read of its error body cut short", async () => {
    const { run, answered } = await failedRun("quoting-cut", LONG_KEY, "cut-secret");
    expect(run.error?.message).toMatch(/^runner answered HTTP 500: \{"error":"中+…$/);
    await expectSecretsKeptOut(host, answered, [LONG_KEY.slice(0, 16)]);
  });
});
