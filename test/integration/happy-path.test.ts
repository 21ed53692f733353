import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEchoRunner } from "../../examples/echo-runner/runner";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";

const SECRET = "echo-runner-secret-0123456789";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startEchoRunner>>;

beforeAll(async () => {
  runner = await startEchoRunner({ secret: SECRET });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, secret: SECRET, runnerId: "http:examples/echo/default", agentId: "echo" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("an event in, the runner called over HTTP, the reply out", () => {
  it("answers 202 started, runs the example runner, and keeps every fact", async () => {
    const first = await host.postEvent(messageEvent("happy-1", "hello"));
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ disposition: "started" });
    expect(first.body.event_id).toMatch(/^evt_/);
    const run1 = await host.waitForRun(first.body.run_id!);
    expect(run1).toMatchObject({ status: "completed", finish_reason: "stop" });
    expect(run1.message).toEqual({ role: "assistant", content: 'You said: "hello" (turn 1)' });

    // The second turn reads the first through history.page and the turn count through state.
    const second = await host.postEvent(messageEvent("happy-1", "again"));
    const run2 = await host.waitForRun(second.body.run_id!);
    expect(run2.message?.content).toBe('You said: "again" (turn 2). Before that you said: "hello"');

    // The stream of a finished run replays its ledger and ends with its status.
    const res = await fetch(`${host.url}/v1/runs/${second.body.run_id}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    // Frames as they come, through caches and through a buffering proxy (nginx holds a response back without this).
    expect(["cache-control", "x-accel-buffering"].map((h) => res.headers.get(h))).toEqual(["no-cache", "no"]);
    const { frames, end } = await readSse(res);
    expect(end).toBe("completed");
    const types = frames.map((f) => f.type);
    expect(types.filter((t) => t === "message.delta").length).toBeGreaterThan(3);
    expect(types.slice(-3)).toEqual(["message.completed", "state.updated", "run.completed"]);
    const streamed = frames.filter((f) => f.type === "message.delta").map((f) => f.data.chunk.content).join("");
    expect(streamed).toBe(run2.message?.content);

    // The ledger is also readable page by page.
    const ledger = await host.admin("GET", `/v1/runs/${second.body.run_id}/events?limit=2`);
    expect(ledger.body.items).toHaveLength(2);
    expect(ledger.body.has_more).toBe(true);

    // The runner verified every request's signature; the secret it shares is sealed at rest.
    const [service] = await host.query<{ secret: string }>("SELECT secret FROM runner_service");
    expect(service.secret).toMatch(/^sealed:v3:/);
    expect(service.secret).not.toContain(SECRET);
  });

  it("streams a live run from its start, replaying what already happened", async () => {
    const ev = await host.postEvent(messageEvent("happy-live", "live please"));
    const res = await fetch(`${host.url}/v1/runs/${ev.body.run_id}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    const { frames, end } = await readSse(res);
    expect(end).toBe("completed");
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    expect(frames.at(-1)?.type).toBe("run.completed");
  });

  it("signs the run request so the runner can verify the host", async () => {
    // The echo runner rejects unsigned or wrongly signed requests with 401; a completed run proves the signature.
    const ev = await host.postEvent(messageEvent("happy-signed", "signed?"));
    expect((await host.waitForRun(ev.body.run_id!)).status).toBe("completed");
  });

  it("runs the example runner for an agent that keeps no state: every turn is its first", async () => {
    const agent = { agent_id: "echo-stateless", name: "stateless", runner_id: "http:examples/echo/default", event_types: ["message.received"], scope: { type: "conversation", id: "happy-stateless" }, state_policy: { enable_state: false } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    for (const text of ["one", "two"]) {
      const run = await host.waitForRun((await host.postEvent(messageEvent("happy-stateless", text))).body.run_id!);
      expect(run.status).toBe("completed");
      expect(String(run.message?.content)).toContain(`"${text}" (turn 1)`);
    }
  });

  it("echoes a message sent as input.contents text parts, and quotes it as the previous one", async () => {
    const parts = { contents: [{ type: "text", text: "hello " }, { type: "text", text: "world" }] };
    const first = await host.waitForRun((await host.postEvent({ ...messageEvent("happy-parts", ""), input: parts })).body.run_id!);
    expect(first.message?.content).toBe('You said: "hello world" (turn 1)');
    const second = await host.waitForRun((await host.postEvent(messageEvent("happy-parts", "again"))).body.run_id!);
    expect(second.message?.content).toBe('You said: "again" (turn 2). Before that you said: "hello world"');
  });

  it("records an event no agent matches and answers unbound", async () => {
    const res = await host.postEvent({ ...messageEvent("happy-unbound", "anyone?"), event_type: "group.member_joined" });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ disposition: "unbound", run_id: null });
  });
});
