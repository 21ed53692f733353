import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { echoConfig, startAdHocRunner, type RunCall } from "../support/runner";

/**
 * The run request as a runner written from PROTOCOL.md alone reads it: §3's request line and headers, the HMAC over
 * the body as sent, and a §5 context that inlines the current event only. Other tests check the signature in passing;
 * nothing else guarded the headers, the body's envelope or the context's fixed parts.
 */
const SECRET = "request-secret-0123456789";
// Not the default, so the deadline is seen to follow the setting.
const DEADLINE_MS = 120_000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({ name: "request", onRun: echoConfig });
  host = await startTestHost({ vars: { RUN_DEADLINE_MS: String(DEADLINE_MS) } });
  await host.bind({ baseUrl: runner.url, secret: SECRET, runnerId: runner.runnerId(), agentId: "request" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function runOf(conversation: string, text: string): Promise<{ call: RunCall; startedAt: number }> {
  const ev = await host.postEvent(messageEvent(conversation, text));
  const run = await host.waitForRun(ev.body.run_id!);
  expect(run.status).toBe("completed");
  return { call: runner.calls.find((c) => c.body.context.run_id === ev.body.run_id)!, startedAt: Date.parse(run.started_at as string) };
}

describe("the run request (PROTOCOL §3, §5)", () => {
  it("is POST /runners/{runner}/run with §3's headers, signed over the body as sent", async () => {
    const { call } = await runOf("request-headers", "hello");
    const { headers, raw, body } = call;
    const timestamp = String(headers["x-agent-timestamp"]);
    expect({
      request: `${call.method} ${call.url}`,
      contentType: headers["content-type"],
      accept: headers.accept,
      runId: headers["x-agent-run-id"],
      timestamp: /^\d+$/.test(timestamp) && Math.abs(Number(timestamp) - Date.now() / 1000) < 60,
      signature: headers["x-agent-signature"],
      envelope: Object.keys(body).sort(),
      runner: [body.runner_id, body.runner_name],
    }).toEqual({
      request: "POST /runners/default/run",
      contentType: "application/json",
      accept: "application/x-ndjson",
      runId: body.context.run_id,
      timestamp: true,
      signature: `v1=${createHmac("sha256", SECRET).update(`${timestamp}.${raw}`).digest("hex")}`,
      envelope: ["context", "runner_id", "runner_name"],
      runner: [runner.runnerId(), "default"],
    });
  });

  it("carries the current event only, its deadline and token expiry from the run's start", async () => {
    await runOf("request-context", "first-words");
    const { call, startedAt } = await runOf("request-context", "second-words");
    const ctx = call.body.context;
    // No history window inlined: the earlier message is not anywhere in the request (history.page reads it).
    expect(call.raw).not.toContain("first-words");
    expect({
      inlined: ["messages", "bootstrap"].filter((k) => k in ctx),
      input: ctx.input.text,
      trigger: ctx.trigger.type === ctx.event.event_type,
      mode: ctx.context.inline_policy.mode,
      apis: Object.keys(ctx.context.available_apis).sort(),
      state: Object.keys(ctx.state).sort(),
      expiresAtDeadline: ctx.runtime.api.expires_at === ctx.runtime.deadline_at,
    }).toEqual({
      inlined: [],
      input: "second-words",
      trigger: true,
      mode: "current_event",
      apis: ["artifact_metadata", "artifact_read", "event_get", "event_page", "history_page", "history_search", "state", "steering_pull", "storage"],
      state: ["actor", "conversation", "runner", "subject"],
      expiresAtDeadline: true,
    });
    // RUN_DEADLINE_MS after the run started (the start is stamped as it is claimed, a moment apart from the timer).
    expect(Math.abs(Date.parse(ctx.runtime.deadline_at) - startedAt - DEADLINE_MS)).toBeLessThan(1000);
  });
});
