import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner, type RunCall } from "../support/runner";
import { expectSecretsKeptOut } from "../support/secrets-kept-out";

/**
 * A run's error quotes its runner's words (an error body's start, a line that is not JSON, a run id it named, its own
 * run.failed's error, the keys of a result it dropped). A runner may quote back what its request carried: a web
 * framework's 422 echoes the field it refused (FastAPI's `input`), a debug print lands in the stream, an exception's
 * text names the URL it called. The host quotes none of the request's secrets (the agent's secret
 * runner_config values, the run's token) into the run's error, its ledger, EventLog or its log: later runs of the
 * conversation, whatever their runner, read EventLog (event.page), and no view shows a secret field's value.
 */
const API_KEY = "agent-config-secret-5f1e9a7c";
/** Longer than what is left of the 512 bytes read of an error body after its opening: only its head is read. */
const LONG_KEY = `long-secret-${"k7Q2".repeat(20)}`;
/** An unknown artifact a run names (the refusal quotes the id it was given). */
const UNKNOWN_ARTIFACT = "art_never_stored";

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
    case "encoded-as-token":
      // A coding the host does not decode, named after what the runner was sent: the error names the coding.
      res.writeHead(200, { "content-type": "application/x-ndjson", "content-encoding": token });
      res.end("x");
      return;
    case "artifact-named-by-secret": {
      // A reference to an artifact the host never stored, named by the key: refused, the refusal naming it.
      const lines = [
        { run_id: ctx.run_id, type: "artifact.created", data: { artifact_type: "file", artifact_id: key } },
        { run_id: ctx.run_id, type: "run.completed", data: { finish_reason: "stop", message: { role: "assistant", content: "done" } } },
      ];
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
      return;
    }
    case "keyed-by-secret":
      // A map keyed by the key (a per-credential cache, dumped): zod names the key it refused, and the run ends without a valid end.
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(`${JSON.stringify({ run_id: ctx.run_id, type: "run.completed", data: { finish_reason: "stop", [String(key)]: { hits: 1 } } })}\n`);
      return;
    case "host-words": {
      // Results the host drops for reasons of its own words (a blank message), and one naming an artifact it never stored.
      const lines = [
        { run_id: ctx.run_id, type: "message.completed", data: { message: { role: "assistant", content: " " } } },
        { run_id: ctx.run_id, type: "artifact.created", data: { artifact_type: "file", artifact_id: `${UNKNOWN_ARTIFACT}_${key}` } },
        { run_id: ctx.run_id, type: "run.completed", data: { finish_reason: "stop", message: { role: "assistant", content: "done" } } },
      ];
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
      return;
    }
    case "own-failure":
      // An HTTP library's exception text, passed on as the run's failure: it names the URL it called, key and all.
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(`${JSON.stringify({ run_id: ctx.run_id, type: "run.failed", data: { code: "upstream_error", error: `401 Unauthorized for url: https://api.example.com/v1?key=${key} (token ${token})`, retryable: false } })}\n`);
      return;
  }
  json(res, 400, { error: "unknown case" });
}

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "quoting",
    runners: [{ name: "default", label: { en_US: "quoting" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" } }, { name: "pin", type: "secret", label: { en_US: "PIN" } }], permissions: { events: ["page"] } }],
    onRun: answer,
  });
  host = await startTestHost({ captureLogs: true });
  await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function failedRun(agentId: string, key: unknown, text: string, more: Record<string, unknown> = {}) {
  const agent = { agent_id: agentId, name: agentId, runner_id: runner.runnerId(), runner_config: { api_key: key, ...more }, event_types: ["message.received"], scope: { type: "conversation", id: agentId } };
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
    ["encoded-as-token", "runner.protocol_error", /^runner answered with Content-Encoding \[redacted\], which the host does not decode/],
  ])("is not quoted in the run's error, ledger, EventLog or log (%s)", async (text, code, shown) => {
    const { run, answered } = await failedRun(`quoting-${text}`, API_KEY, text);
    expect(run.error?.code).toBe(code);
    // Still told what the runner said, the secret aside.
    expect(run.error?.message).toMatch(shown);
    // The token's head too: a quote cut short (a header's first 40 characters) is scrubbed before the cut.
    await expectSecretsKeptOut(host, answered, [API_KEY, tokens.at(-1)!, tokens.at(-1)!.slice(0, 16)]);
  });

  // The ledger keeps the runner's results as sent; the host's words about them (the run's error, a drop's warning and
  // its runner.result_dropped record in EventLog) leave the secrets out.
  it.each([
    ["keyed-by-secret", "runner.stream_closed", /^the result stream ended without a valid run\.completed or run\.failed \(dropped, run\.completed: Unrecognized key: "\[redacted\]"\)$/],
    ["own-failure", "upstream_error", /^401 Unauthorized for url: https:\/\/api\.example\.com\/v1\?key=\[redacted\] \(token \[redacted\]\)$/],
  ])("nor in the host's words about a result it sent (%s)", async (text, code, shown) => {
    const { run, answered } = await failedRun(`quoting-${text}`, API_KEY, text);
    expect([run.error?.code, run.error?.message]).toEqual([code, expect.stringMatching(shown)]);
    const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items as { origin: string; data: unknown }[];
    const hostWords = ledger.filter((e) => e.origin === "host").map((e) => JSON.stringify(e.data));
    await expectSecretsKeptOut(host, [answered[0], answered[2], ...hostWords], [API_KEY, tokens.at(-1)!]);
  });

  it("nor in the warning and runner.result_dropped record of a reference it named by one", async () => {
    const agent = { agent_id: "quoting-artifact", name: "quoting-artifact", runner_id: runner.runnerId(), runner_config: { api_key: API_KEY }, event_types: ["message.received"], scope: { type: "conversation", id: "quoting-artifact" } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    const run = await host.waitForRun((await host.postEvent(messageEvent("quoting-artifact", "artifact-named-by-secret"))).body.run_id!);
    expect(run.status).toBe("completed");
    const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items as { origin: string; data: { code?: string; message?: string } }[];
    const warnings = ledger.filter((e) => e.origin === "host");
    expect(warnings.map((e) => [e.data.code, e.data.message])).toEqual([["result.invalid_payload", expect.stringMatching(/^artifact\.created dropped: artifact \[redacted\] /)]]);
    const events = await host.admin("GET", "/v1/conversations/events?conversation_id=quoting-artifact");
    const dropped = (events.body.items as { event_type: string; data: Record<string, unknown> }[]).filter((e) => e.event_type === "runner.result_dropped");
    expect(dropped.map((e) => e.data.artifact_id)).toEqual(["[redacted]"]);
    await expectSecretsKeptOut(host, [JSON.stringify(run), JSON.stringify(events.body), ...warnings.map((e) => JSON.stringify(e.data))], [API_KEY]);
  });

  it("nor a secret shorter than those scrubbed from upstream answers (6 characters)", async () => {
    const { run, answered } = await failedRun("quoting-short", "k9Z3", "refused-field");
    expect(run.error?.message).toMatch(/^runner answered HTTP 422: .*"input":"\[redacted\]"/);
    await expectSecretsKeptOut(host, answered, ["k9Z3"]);
  });

  it("nor takes apart the [redacted] of one with another that is in it (a short secret)", async () => {
    // "ct" is in "[redacted]" and nowhere else in the body: each secret is replaced where the runner's words hold it, once.
    const { run, answered } = await failedRun("quoting-in-marker", API_KEY, "refused-token", { pin: "ct" });
    expect(run.error?.message).toBe('runner answered HTTP 401: {"error":"token [redacted] is not one this runner issued"}');
    await expectSecretsKeptOut(host, answered, [tokens.at(-1)!]);
  });

  it("and reads a secret of whitespace alone as none: a quote keeps its spaces", async () => {
    // A space as a PIN hides nothing; taken as a secret, it would take every space out of what the runner said.
    const { run } = await failedRun("quoting-blank-pin", API_KEY, "refused-token", { pin: " " });
    expect(run.error?.message).toBe('runner answered HTTP 401: {"error":"token [redacted] is not one this runner issued"}');
  });

  it("nor the head of one cut short when a shorter secret is in that head", async () => {
    // The 512 bytes read end inside LONG_KEY; the PIN is in its head: that head is left out all the same.
    const { run, answered } = await failedRun("quoting-cut-pin", LONG_KEY, "cut-secret", { pin: "k7Q2" });
    expect(run.error?.message).toMatch(/^runner answered HTTP 500: \{"error":"中+…$/);
    await expectSecretsKeptOut(host, answered, ["long-secret-"]);
  });

  it("and leaves the host's own words and facts whole, a short secret only out of what quotes the runner", async () => {
    // "on" is in the host's words ("no content") and in the reference the runner named: only the latter is a quote.
    const agentId = "quoting-host-words";
    const { run } = await failedRun(agentId, "on", "host-words");
    expect(run.status).toBe("completed");
    const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items as { origin: string; data: { code?: string; message?: string } }[];
    expect(ledger.filter((e) => e.origin === "host").map((e) => [e.data.code, e.data.message])).toEqual([
      ["result.invalid_payload", "message.completed dropped: the message has no content"],
      ["result.invalid_payload", `artifact.created dropped: artifact ${UNKNOWN_ARTIFACT}_[redacted] does not exist`],
    ]);
    const events = await host.admin("GET", `/v1/conversations/events?conversation_id=${agentId}`);
    const dropped = (events.body.items as { event_type: string; data: Record<string, unknown> }[]).filter((e) => e.event_type === "runner.result_dropped");
    expect(dropped.map((e) => [e.data.reason, e.data.artifact_id]).sort()).toEqual([
      [`artifact ${UNKNOWN_ARTIFACT}_[redacted] does not exist`, `${UNKNOWN_ARTIFACT}_[redacted]`],
      ["the message has no content", undefined],
    ]);
  });

  it.each([
    ["text", "string", API_KEY, [API_KEY]],
    ["a number", "integer", 987654321012, ["987654321012"]],
    ["an object", "credentials", { user: "svc-reader", password: "obj-secret-77aa" }, ["svc-reader", "obj-secret-77aa"]],
    // Stored as a JSON `\ud83d` (sealed, it would have become U+FFFD): no URL could carry it, yet the quote is scrubbed.
    ["text with half a surrogate pair", "text", "half-\ud83d-pair-secret", ["pair-secret"]],
  ])("nor a value stored before its runner called the field secret (not sealed, masked all the same): %s", async (what, type, value, shownNowhere) => {
    const agentId = `late-secret-${type}`;
    const runners = [{ name: "default", label: { en_US: "late" }, config_schema: [{ name: "api_key", type, label: { en_US: "Key" } }] as Record<string, unknown>[] }];
    const late = await startAdHocRunner({ name: agentId, runners, onRun: answer });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: late.url })).body.service.service_id;
      const agent = { agent_id: agentId, name: agentId, runner_id: late.runnerId(), runner_config: { api_key: value }, event_types: ["message.received"], scope: { type: "conversation", id: agentId } };
      expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
      runners[0].config_schema[0] = { name: "api_key", type: "secret", label: { en_US: "Key" } };
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
      expect((await host.admin("GET", `/v1/admin/agents/${agentId}`)).body.runner_config).toEqual({ api_key: "********" });
      const posted = await host.postEvent(messageEvent(agentId, "refused-field"));
      const run = await host.waitForRun(posted.body.run_id!);
      expect(run.error?.message, what).toMatch(/^runner answered HTTP 422: .*\[redacted\]/);
      await expectSecretsKeptOut(host, [JSON.stringify(run)], shownNowhere);
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
