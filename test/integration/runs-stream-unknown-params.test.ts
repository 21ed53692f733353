import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readSse, startTestHost, type TestHost } from "../support/host";
import { MAX_FOLLOWERS_PER_RUN } from "../../src/run/live";
import { deferred } from "../support/host-api";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * GET /v1/runs/{id}/stream resumes from `Last-Event-ID`, or from `?lastEventId=`, where EventSource polyfills put it
 * on reconnect (README). A follower naming its position in a parameter the host does not know (`?after=`) must not
 * be silently replayed the whole ledger from the start, frames it already has included: it is refused with 400, as
 * on the run's ledger (`/events?after=`) and its listings.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "stream-params" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "stream-params", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a run's stream told where to resume", () => {
  it("refuses a query parameter it does not know with 400 instead of replaying from the start", async () => {
    const { runId } = await runner.run(host, "stream-params", async (_api, _ctx, emit) => {
      for (let i = 0; i < 4; i++) emit("custom.progress", { i });
      return "ok";
    });
    // The ledger refuses it (unknown-query-params.test.ts); the stream must not answer it as if it were absent.
    expect((await host.admin("GET", `/v1/runs/${runId}/events?after=3`)).status).toBe(400);
    const res = await fetch(`${host.url}/v1/runs/${runId}/stream?after=3`, { headers: auth() });
    const replayed = res.status === 200 ? (await readSse(res)).frames.map((f) => f.seq) : (await res.body?.cancel(), []);
    expect({ status: res.status, replayedFromSeq: replayed[0] }).toEqual({ status: 400, replayedFromSeq: undefined });
    const bad = await fetch(`${host.url}/v1/runs/${runId}/stream?lastEventId=three`, { headers: auth() });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("invalid_request");
  });

  it("resumes after the frame a polyfill names in lastEventId, as after the Last-Event-ID header", async () => {
    const { runId } = await runner.run(host, "stream-params", async (_api, _ctx, emit) => {
      for (let i = 0; i < 4; i++) emit("custom.progress", { i });
      return "ok";
    });
    const byQuery = await fetch(`${host.url}/v1/runs/${runId}/stream?lastEventId=3`, { headers: auth() });
    expect(byQuery.status).toBe(200);
    const byHeader = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { ...auth(), "last-event-id": "3" } });
    expect(byHeader.status).toBe(200);
    const [fromQuery, fromHeader] = await Promise.all([readSse(byQuery), readSse(byHeader)]);
    expect(fromQuery.frames[0].seq).toBe(4);
    expect(fromQuery.frames.map((f) => f.seq)).toEqual(fromHeader.frames.map((f) => f.seq));
  });
});

describe("a run's stream with as many followers as it may have", () => {
  it("refuses one more with 429 naming the limit, and lets followers in again once the run has ended", async () => {
    const hold = deferred();
    const started = deferred();
    const done = runner.run(host, "stream-params", async () => {
      started.resolve();
      await hold.promise;
      return "ok";
    });
    await started.promise;
    const runId = (await host.admin("GET", "/v1/runs?conversation_id=stream-params&status=running")).body.items[0].run_id;
    const follow = () => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth() });
    const followers = await Promise.all(Array.from({ length: MAX_FOLLOWERS_PER_RUN }, follow));
    expect(followers.map((r) => r.status)).toEqual(followers.map(() => 200));
    const extra = await follow();
    expect([extra.status, ((await extra.json()) as { error: { code: string; details: unknown } }).error]).toEqual([429, expect.objectContaining({ code: "rate_limited", details: { limit: MAX_FOLLOWERS_PER_RUN } })]);
    hold.resolve();
    await done;
    // Every follower got the end; the run's stream replays to whoever asks now.
    const ends = await Promise.all(followers.map(async (r) => (await readSse(r)).end));
    expect(new Set(ends)).toEqual(new Set(["completed"]));
    const after = await follow();
    expect([after.status, (await readSse(after)).end]).toEqual([200, "completed"]);
  });
});
