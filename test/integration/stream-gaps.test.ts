import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeRetrieval } from "../support/fake-retrieval";
import { readSse, startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * A Host API call whose ledger record could not be written (the database
 * refused it once) leaves its `seq` unused: the run goes on and the rest of
 * its ledger is recorded after the hole. The run's stream must still replay
 * that ledger and end.
 */
let host: TestHost;
let retrieval: Awaited<ReturnType<typeof startFakeRetrieval>>;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const KB_KEY = "kb-key-0123456789abcdef";

beforeAll(async () => {
  retrieval = await startFakeRetrieval({ apiKey: KB_KEY });
  runner = await startScriptedRunner({
    name: "gap",
    runners: [{ name: "default", label: { en_US: "gap" }, capabilities: { streaming: true, knowledge_retrieval: true }, permissions: { knowledge_bases: ["list", "retrieve"] } }],
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "docs", name: "Docs", endpoint: retrieval.url, api_key: KB_KEY })).status).toBe(201);
  await runner.register(host);
  const agent = { agent_id: "gap", name: "gap", runner_id: runner.runnerId(), event_types: ["message.received"], resource_policy: { knowledge_bases: ["docs"] } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await retrieval?.close();
});

/** The stream read with a time limit: null (and the request dropped) when it has not ended by then. */
async function streamWithin(runId: string, ms: number) {
  const abort = new AbortController();
  const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` }, signal: abort.signal });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<null>((r) => (timer = setTimeout(() => r(null), ms)));
  const read = await Promise.race([readSse(res).catch(() => null), late]);
  clearTimeout(timer);
  if (read === null) abort.abort();
  return read;
}

describe("run stream over a ledger with a hole", () => {
  it("replays every recorded entry and ends, though one seq was never recorded", async () => {
    const { runId } = await runner.run(host, "gap-conv", async (api, _ctx, emit) => {
      // The knowledge.retrieved record is refused once: its seq stays unused (knowledge.failed follows it).
      host.databaseOutage({ queries: 1, matching: "knowledge.retrieved" });
      const answer = await api("knowledge.retrieve", { kb_id: "docs", query: "q" });
      for (let i = 0; i < 600; i++) emit("message.delta", { chunk: { role: "assistant", content: `${i} ` } });
      return answer.status;
    });
    const recorded = (await host.query<{ seq: number }>("SELECT seq FROM run_event WHERE run_id = ? ORDER BY seq", [runId])).map((r) => r.seq);
    // The hole is there: the first seq the Host API took was not recorded.
    expect(recorded.length).toBeGreaterThan(600);
    expect(recorded[recorded.length - 1]).toBe(recorded.length + 1);

    const sse = await streamWithin(runId, 15_000);
    expect(sse?.end ?? "the stream never ended").toBe("completed");
    expect(sse!.frames.map((f) => f.seq)).toEqual(recorded);
  }, 60_000);
});

describe("resuming an ended run's stream over a ledger with a hole", () => {
  /**
   * A frame's `id` is the seq up to which the stream has sent every frame. It stayed below the hole for the rest
   * of the stream, though a seq missing from an ended run's ledger will never come: an EventSource that lost its
   * connection anywhere after the hole was replayed everything after it again.
   */
  it("sends ids past the hole, so a reconnect gets only the frames it had not had", async () => {
    const { runId } = await runner.run(host, "gap-resume", async (api, _ctx, emit) => {
      host.databaseOutage({ queries: 1, matching: "knowledge.retrieved" });
      await api("knowledge.retrieve", { kb_id: "docs", query: "q" });
      for (let i = 0; i < 20; i++) emit("message.delta", { chunk: { role: "assistant", content: `${i} ` } });
      return "done";
    });
    const recorded = (await host.query<{ seq: number }>("SELECT seq FROM run_event WHERE run_id = ? ORDER BY seq", [runId])).map((r) => Number(r.seq));
    expect(recorded[recorded.length - 1]).toBe(recorded.length + 1);
    const text = await (await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } })).text();
    // The id and seq of each result frame, as an EventSource sees them.
    const frames = [...text.matchAll(/^id: (\d+)\nevent: result\ndata: (.*)$/gm)].map((m) => ({ id: m[1], seq: JSON.parse(m[2]).seq as number }));
    expect(frames.map((f) => f.seq)).toEqual(recorded);
    // The connection drops after the tenth frame; the reconnect names its id.
    const had = frames[9];
    const resumed = await readSse(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}`, "last-event-id": had.id } }));
    expect({ end: resumed.end, seqs: resumed.frames.map((f) => f.seq) }).toEqual({ end: "completed", seqs: recorded.slice(10) });
  });
});

describe("following a running run's ledger page by page", () => {
  it("never moves the cursor past an entry that is numbered but not yet written", async () => {
    const seen: number[] = [];
    let cursor: string | undefined;
    const follow = async () => {
      const res = await host.admin<{ items: { seq: number }[]; next_cursor?: string; run_status: string }>("GET", `/v1/runs/${runId}/events${cursor ? `?cursor=${cursor}` : ""}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.items.map((i) => i.seq));
      cursor = res.body.next_cursor;
      return res.body;
    };
    let runId = "";
    const marker = "slow-ledger-write-7f3a";
    let followedDuringHold = false;
    ({ runId } = await runner.run(host, "gap-follow", async (api, ctx, emit) => {
      runId = ctx.run_id;
      // This delta's ledger row is numbered when read, then its write is held...
      host.databaseOutage({ delayMs: 1500, matching: marker });
      emit("message.delta", { chunk: { role: "assistant", content: marker } });
      await new Promise((r) => setTimeout(r, 300));
      // ...while a Host API record takes the next number and is written at once.
      expect((await api("knowledge.retrieve", { kb_id: "docs", query: "q" })).status).toBe(200);
      const page = await follow();
      followedDuringHold = page.run_status === "running";
      return "done";
    }));
    expect(followedDuringHold).toBe(true);
    // The run has ended: what was held back is shown now, in order, and then nothing more.
    while ((await follow()).items.length);
    const recorded = (await host.query<{ seq: number }>("SELECT seq FROM run_event WHERE run_id = ? ORDER BY seq", [runId])).map((r) => r.seq);
    expect(recorded.length).toBeGreaterThan(3);
    expect(seen).toEqual(recorded);
  }, 60_000);
});
