import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * GET /v1/runs/{id}/stream follows a run until it ends, whatever state the
 * run is in when the follower comes: not yet handed to its conversation
 * (ingress recorded it, the hand-over was lost, a redelivery hands it over
 * later), running, or ended. A reconnecting EventSource names the last frame
 * it had (`Last-Event-ID`, frames carry `id: {seq}`) and gets only what follows; one that had the end is told to stop.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "follow" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "follow", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("the stream of a run not yet handed to its conversation", () => {
  it("follows the run once a redelivery hands it over, to its terminal end", async () => {
    const lost = await unhandedRun(host, "follow-unhanded", "follow-unhanded-1");
    const stream = await fetch(`${host.url}/v1/runs/${lost}/stream`, { headers: auth() });
    expect(stream.status).toBe(200);
    const followed = readSse(stream);
    await new Promise((r) => setTimeout(r, 300));

    const again = await host.postEvent(messageEvent("follow-unhanded", "first", { event_id: "follow-unhanded-1" }));
    expect(again.body).toMatchObject({ disposition: "duplicate", run_id: lost });
    expect((await host.waitForRun(lost)).status).toBe("completed");
    const { frames, end } = await followed;
    expect({ end, types: frames.map((f) => f.type) }).toEqual({ end: "completed", types: ["message.completed", "run.completed"] });
  });

  it("ends cancelled when an operator cancels the run instead", async () => {
    const lost = await unhandedRun(host, "follow-cancelled", "follow-cancelled-1");
    const followed = readSse(await fetch(`${host.url}/v1/runs/${lost}/stream`, { headers: auth() }));
    await new Promise((r) => setTimeout(r, 300));
    expect((await host.admin("POST", `/v1/runs/${lost}/cancel`)).status).toBe(202);
    const { frames, end } = await followed;
    expect({ end, types: frames.map((f) => f.type) }).toEqual({ end: "cancelled", types: ["run.failed"] });
  });
});

describe("Last-Event-ID", () => {
  it("resumes an ended run's stream after the last frame the client had", async () => {
    const { runId } = await runner.run(host, "follow-resume-ended", async (_api, _ctx, emit) => {
      for (let i = 0; i < 5; i++) emit("custom.progress", { i });
      return "ok";
    });
    const whole = await readSse(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth() }));
    expect(whole.frames.length).toBeGreaterThan(4);
    const resumed = await readSse(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { ...auth(), "last-event-id": "4" } }));
    expect(resumed.end).toBe("completed");
    expect(resumed.frames.map((f) => f.seq)).toEqual(whole.frames.map((f) => f.seq).filter((s) => s > 4));
  });

  it("resumes a running run's stream, its replay from memory included, then follows it live", async () => {
    const release = deferred();
    const emitted = deferred();
    const done = runner.run(host, "follow-resume-live", async (_api, _ctx, emit) => {
      for (let i = 0; i < 4; i++) emit("custom.progress", { i });
      emitted.resolve();
      await release.promise;
      emit("custom.progress", { i: 4 });
      return "ok";
    });
    await emitted.promise;
    const [run] = (await host.admin("GET", "/v1/runs?conversation_id=follow-resume-live&limit=1")).body.items;
    const ledgerSeqs = async () => (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items.map((e: { seq: number }) => e.seq) as number[];
    await expect.poll(async () => (await ledgerSeqs()).length).toBeGreaterThanOrEqual(4);
    const followed = readSse(await fetch(`${host.url}/v1/runs/${run.run_id}/stream`, { headers: { ...auth(), "last-event-id": "2" } }));
    await new Promise((r) => setTimeout(r, 200));
    release.resolve();
    await done;
    const { frames, end } = await followed;
    expect(end).toBe("completed");
    expect(frames.map((f) => f.seq)).toEqual((await ledgerSeqs()).filter((s) => s > 2));
    expect(frames.map((f) => f.type).slice(-2)).toEqual(["message.completed", "run.completed"]);
  });

  /**
   * EventSource reconnects whenever a stream closes, the close after `event: end` included, naming the last `id:`
   * it had: a client that does not close it on `end` came back every few seconds forever, answered `end` again each
   * time. The end frame has its own id, and a reconnect naming it is answered 204, which stops an EventSource.
   */
  it("tells an EventSource that had the end to stop reconnecting, for an ended run and for one followed live", async () => {
    const lastId = (text: string) => [...text.matchAll(/^id: (.*)$/gm)].at(-1)?.[1];
    const { runId } = await runner.run(host, "follow-end-ended", async () => "ok");
    const ended = await (await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth() })).text();
    expect(lastId(ended)).toBe("end");
    const again = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { ...auth(), "last-event-id": "end" } });
    expect([again.status, await again.text()]).toEqual([204, ""]);
    const byQuery = await fetch(`${host.url}/v1/runs/${runId}/stream?lastEventId=end`, { headers: auth() });
    expect([byQuery.status, await byQuery.text()]).toEqual([204, ""]);
    // One that missed the end (it had the last result frame only) still gets it.
    const lastFrame = [...ended.matchAll(/^id: (\d+)$/gm)].at(-1)![1];
    expect(await readSse(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { ...auth(), "last-event-id": lastFrame } }))).toEqual({ frames: [], end: "completed" });
    const unknown = await fetch(`${host.url}/v1/runs/run_unknown/stream`, { headers: { ...auth(), "last-event-id": "end" } });
    expect(unknown.status).toBe(404);

    const release = deferred();
    const started = deferred();
    const live = runner.run(host, "follow-end-live", async () => {
      started.resolve();
      await release.promise;
      return "ok";
    });
    await started.promise;
    const [run] = (await host.admin("GET", "/v1/runs?conversation_id=follow-end-live&limit=1")).body.items;
    const followed = fetch(`${host.url}/v1/runs/${run.run_id}/stream`, { headers: auth() }).then((r) => r.text());
    await new Promise((r) => setTimeout(r, 200));
    release.resolve();
    await live;
    const text = await followed;
    expect(text).toMatch(/^event: end$/m);
    expect(lastId(text)).toBe("end");
    expect((await fetch(`${host.url}/v1/runs/${run.run_id}/stream`, { headers: { ...auth(), "last-event-id": lastId(text)! } })).status).toBe(204);
  });

  it("is refused with 400 when it is not a frame id", async () => {
    const { runId } = await runner.run(host, "follow-resume-bad", async () => "ok");
    const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { ...auth(), "last-event-id": "x1" } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_request");
  });
});
