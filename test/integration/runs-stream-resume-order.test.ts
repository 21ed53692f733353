import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { startFakeTools } from "../support/fake-tool";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A run's live frames may arrive out of seq order (results are numbered when
 * read and written with their batch; a Host API record numbered later can be
 * written, and published, first). Each frame's SSE `id` is the seq up to
 * which the follower has every frame, so an EventSource that reconnects with
 * its `Last-Event-ID` still gets each frame published late.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let tools: Awaited<ReturnType<typeof startFakeTools>>;
const MARKER = "last-id-slow-written-marker";

beforeAll(async () => {
  tools = await startFakeTools({ bigBytes: 10 });
  runner = await startAdHocRunner({
    name: "last-id-order",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, tool_calling: true }, permissions: { tools: ["detail", "call"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      w.send("custom.progress", { marker: MARKER });
      await new Promise((r) => setTimeout(r, 150));
      await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "tool.call", { tool_name: "weather", parameters: { city: "Oslo" } });
      await new Promise((r) => setTimeout(r, 2_500));
      w.reply("done");
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/tools", { name: "weather", description: "weather", endpoint: `${tools.url}/weather` })).status).toBe(201);
  const agent = { agent_id: "last-id-order", name: "s", runner_id: runner.runnerId(), event_types: ["message.received"], resource_policy: { tools: ["weather"] } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
  await tools?.close();
});

const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

/** Reads SSE frames until `stop` says so; answers the frames and the last `id:` seen (what an EventSource keeps). */
async function readUntil(res: Response, stop: (frames: { seq: number; type: string }[]) => boolean) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  const frames: { seq: number; type: string }[] = [];
  let lastId: string | null = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const id = /^id: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (id !== undefined) lastId = id;
      if (/^event: result$/m.test(block) && data) frames.push(JSON.parse(data));
    }
    if (stop(frames)) break;
  }
  await reader.cancel().catch(() => undefined);
  return { frames, lastId };
}

describe("Last-Event-ID when frames arrive out of seq order", () => {
  it("a reconnecting follower still gets every frame of the ledger", async () => {
    // The result carrying the marker is numbered at once but its write is held a while.
    host.databaseOutage({ delayMs: 1_500, matching: MARKER });
    const posted = await host.postEvent(messageEvent("last-id-order", "go"));
    const runId = posted.body.run_id!;
    const first = await readUntil(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth() }), (f) => f.some((x) => x.type === "tool.call.completed"));
    // The connection drops here; the EventSource reconnects naming the last id it had.
    expect(first.lastId).not.toBeNull();
    const resumed = await readSse(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { ...auth(), "last-event-id": first.lastId! } }));
    expect(resumed.end).toBe("completed");

    const ledger = (await host.query<{ seq: number; type: string }>("SELECT seq, type FROM run_event WHERE run_id = ? ORDER BY seq", [runId])).map((r) => Number(r.seq));
    const seen = [...new Set([...first.frames.map((f) => f.seq), ...resumed.frames.map((f) => f.seq)])].sort((a, b) => a - b);
    expect({ firstOrder: first.frames.map((f) => `${f.seq}:${f.type}`), seen }).toEqual({ firstOrder: expect.anything(), seen: ledger });
  });
});
