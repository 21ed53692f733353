/**
 * A run's end whose write the database refuses once (one 503, as LocalHost.databaseOutage drills it) and then
 * answers again: the same end is tried again and recorded, never replaced by another (failed, host.internal_error),
 * so an operator's cancel still ends `cancelled` and a run whose runner completed ends `completed`, its answer in
 * the Transcript.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const holds = new Map<string, ReturnType<typeof deferred<void>>>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "cancel-blip",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      w.send("message.delta", { chunk: { role: "assistant", content: "thinking" } });
      await holds.get(ctx.input.text)?.promise;
      w.reply(`re: ${ctx.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  await putAgent(host, { agent_id: "cancel-blip", runner_id: runner.runnerId() });
});
afterAll(async () => {
  for (const h of holds.values()) h.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

async function started(conversation: string, text: string) {
  holds.set(text, deferred());
  const runId = (await host.postEvent(messageEvent(conversation, text))).body.run_id!;
  await expect.poll(async () => (await host.admin("GET", `/v1/runs/${runId}/events`)).body.items.length, { timeout: 5000 }).toBeGreaterThan(0);
  return runId;
}

describe("a run's end whose first write the database refuses once", () => {
  it("a cancelled run still ends cancelled", async () => {
    const runId = await started("blip-cancel", "cancel me");
    host.databaseOutage({ queries: 1, matching: "run cancelled by an operator" });
    expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
    const run = await host.waitForRun(runId);
    expect({ status: run.status, code: run.error?.code }).toEqual({ status: "cancelled", code: "cancelled" });
  });

  it("a completed run still ends completed", async () => {
    const runId = await started("blip-complete", "finish me");
    host.databaseOutage({ queries: 1, matching: "finish me" });
    holds.get("finish me")!.resolve();
    const run = await host.waitForRun(runId);
    const transcript = await host.admin("GET", "/v1/conversations/transcript?conversation_id=blip-complete");
    // The runner answered in full; one transient refusal of the write that records it must not lose the answer.
    expect({ status: run.status, code: run.error?.code, transcript: transcript.body.items.map((i: any) => `${i.role}: ${i.content}`) }).toEqual({
      status: "completed",
      code: undefined,
      transcript: ["assistant: re: finish me", "user: finish me"],
    });
  });
});
