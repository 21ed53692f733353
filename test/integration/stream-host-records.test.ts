import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { startFakeTools } from "../support/fake-tool";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * What a live follower of a run sees against what the run's ledger holds, when a Host API
 * call in flight is stopped by the run's end (an operator cancel) and records its outcome afterwards.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let tools: Awaited<ReturnType<typeof startFakeTools>>;
const toolAnswers: number[] = [];

beforeAll(async () => {
  tools = await startFakeTools({ bigBytes: 10 });
  runner = await startAdHocRunner({
    name: "host-records",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, tool_calling: true }, permissions: { tools: ["detail", "call"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      w.send("message.delta", { chunk: { role: "assistant", content: "working" } });
      if (ctx.input.text.startsWith("held record")) {
        // The call fails (its tool.call.started write got no answer); the run then works on a while, or ends at once.
        await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "tool.call", { tool_name: "slow", parameters: {} }).catch(() => null);
        if (ctx.input.text === "held record, more work") await new Promise((r) => setTimeout(r, 2_500));
        return w.reply("done");
      }
      // The slow tool never answers: the call lasts until the run is stopped.
      const answer = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "tool.call", { tool_name: "slow", parameters: {} }).catch(() => null);
      toolAnswers.push(answer?.status ?? -1);
      if (!res.destroyed) w.reply("done");
    },
  });
  host = await startTestHost({ vars: { TOOL_CALL_TIMEOUT_MS: "60000", DB_QUERY_TIMEOUT_MS: "2000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/tools", { name: "slow", description: "slow tool", endpoint: `${tools.url}/slow` })).status).toBe(201);
  const agent = { agent_id: "host-records", name: "s", runner_id: runner.runnerId(), event_types: ["message.received"], resource_policy: { tools: ["slow"] } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
  await tools?.close();
});

const stream = (runId: string) => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });


describe("a run cancelled during a tool call", () => {
  it("its live follower sees the same ledger as a replay, and nothing is recorded after the run's terminal entry", async () => {
    const posted = await host.postEvent(messageEvent("host-records-cancel", "go"));
    const runId = posted.body.run_id!;
    const ledgerTypes = async () => (await host.query<{ type: string }>("SELECT type FROM run_event WHERE run_id = ? ORDER BY seq", [runId])).map((r) => r.type);
    await waitFor(async () => (await ledgerTypes()).includes("tool.call.started"), 10_000, "the tool call to be recorded");

    const live = stream(runId);
    // The stopped call's record takes a while to write (one database round trip, widened here).
    host.databaseOutage({ delayMs: 1_000, matching: "tool.call.completed" });
    expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
    const followed = await readSse(await live);
    expect(followed.end).toBe("cancelled");

    // Once the held record has landed: a replay then has all the run will ever have.
    await waitFor(async () => (await ledgerTypes()).includes("tool.call.completed"), 10_000, "the stopped call's record");
    const replayed = await readSse(await stream(runId));
    const types = await ledgerTypes();
    // Live frames come as they are written (a result batch may land after a Host API record numbered later): the same entries, by seq.
    const bySeq = (frames: { seq?: number; type?: string }[]) => [...frames].sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0)).map((f) => `${f.seq} ${f.type}`);
    expect({ live: bySeq(followed.frames), lastRecorded: types.at(-1) }).toEqual({ live: bySeq(replayed.frames), lastRecorded: "run.failed" });
    expect(types).toContain("tool.call.completed");
    // A frame is the entry `GET /v1/runs/{id}/events` gives, field for field (a host record carries no runner `sequence` in either).
    const entries = (await host.admin("GET", `/v1/runs/${runId}/events`)).body.items.map(({ cursor: _c, created_at: _t, ...frame }: Record<string, unknown>) => frame);
    expect(replayed.frames).toEqual(entries);
    expect(followed.frames.filter((f) => f.origin === "host").every((f) => !("sequence" in f))).toBe(true);
  });
});

describe("a Host API record whose write got no answer but is applied", () => {
  /** The run's live follower and, once the held write has landed, a replay; the frames by seq. */
  async function followedAndReplayed(c: string, text: string, heldMs: number) {
    // Held past the Worker's 2 s query timeout, then applied.
    host.databaseOutage({ delayMs: heldMs, matching: "tool.call.started" });
    const posted = await host.postEvent(messageEvent(c, text));
    const runId = posted.body.run_id!;
    const followed = await readSse(await stream(runId));
    await new Promise((r) => setTimeout(r, heldMs));
    const replayed = await readSse(await stream(runId));
    const bySeq = (frames: { seq?: number; type?: string }[]) => [...frames].sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0)).map((f) => `${f.seq} ${f.type}`);
    return { status: (await host.waitForRun(runId)).status, end: followed.end, live: bySeq(followed.frames), replay: bySeq(replayed.frames) };
  }

  it("applied while the run goes on: its live follower gets it with the run's end, as a replay shows it", async () => {
    const seen = await followedAndReplayed("host-records-held", "held record, more work", 3_000);
    expect(seen.replay.some((f) => f.endsWith(" tool.call.started"))).toBe(true);
    expect({ status: seen.status, end: seen.end, live: seen.live }).toEqual({ status: "completed", end: "completed", live: seen.replay });
  });

  it("applied only after the run's end: nothing follows the end, so the follower and a replay agree", async () => {
    const seen = await followedAndReplayed("host-records-late", "held record, end at once", 4_000);
    expect(seen.replay.at(-1)).toMatch(/ run\.completed$/);
    expect({ status: seen.status, end: seen.end, live: seen.live }).toEqual({ status: "completed", end: "completed", live: seen.replay });
  });
});
