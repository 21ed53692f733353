import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, type TestHost } from "../support/host";
import type { RunCall } from "../support/runner";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import type { ServerResponse } from "node:http";
import { waitFor } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";

/**
 * PROTOCOL §10 through the real path: a steering runner and a plain one, each
 * able to stay busy ("hold …" waits for the test's gate) and to pull its
 * steering queue the way its agent's runner_config says ("all", "one", or never).
 */
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
let steerer: typeof setup.steerer;
let plain: typeof setup.plain;
const started = new Map<string, string[]>();
/** When each conversation's runs reached their runner (ms since the epoch), in call order. */
const startedAt = new Map<string, number[]>();
const gate = (conversation: string) => setup.gate(conversation);
const agentFor = (...args: Parameters<typeof setup.agentFor>) => setup.agentFor(...args);

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, conversation, text, api } = runOf(call, res);
  started.set(conversation, [...(started.get(conversation) ?? []), text]);
  startedAt.set(conversation, [...(startedAt.get(conversation) ?? []), Date.now()]);
  if (text === "report") {
    const page = await api("event.page", { limit: 100 });
    return w.reply(JSON.stringify(page.body.data.items));
  }
  if (text.startsWith("hold") || (ctx.event.event_type === "group.member_joined" && ctx.config.hold_joins === true)) await gate(conversation).promise;
  const pulled: any[] = [];
  // A run may pull only when its agent steers (available_apis.steering_pull).
  const canPull = ctx.context.available_apis.steering_pull === true;
  if (canPull && ctx.config.pull === "all") pulled.push(...(await api("steering.pull")).body.data.items);
  if (canPull && ctx.config.pull === "one") pulled.push(...(await api("steering.pull", { mode: "one-at-a-time" })).body.data.items);
  w.reply(JSON.stringify({ text, can_pull: canPull, pulled: pulled.map((i) => i.input.text), pulled_items: pulled }));
}

beforeAll(async () => {
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: steering ? "steerer" : "plain" }, capabilities: { streaming: true, steering }, permissions: { events: ["get", "page"] } }]);
  ({ host, steerer, plain } = setup);
});
afterAll(async () => {
  await setup?.dispose();
});

const startedTexts = (conversation: string) => started.get(conversation) ?? [];
const reply = async (runId: string) => JSON.parse((await host.waitForRun(runId)).message!.content as string);

/** The run of its own a steered message dropped unpulled is answered in, once decided anew (README "Steering"). */
async function decidedAnew(eventId: string): Promise<string> {
  const event = () => host.admin<{ disposition: string; run_id: string }>("GET", `/v1/events/${eventId}`).then((r) => r.body);
  await waitFor(async () => (await event()).disposition === "bound", 10_000, `${eventId} decided anew`);
  return (await event()).run_id;
}

/** EventLog of a conversation, read by a fresh run the way a runner would. */
async function eventLogOf(conversation: string): Promise<any[]> {
  const res = await host.postEvent(messageEvent(conversation, "report"));
  return reply(res.body.run_id!);
}

describe("steering (PROTOCOL §10)", () => {
  it("claims messages for the active run, which pulls them in claim order; the claims and injections are in EventLog", async () => {
    const c = "steer-all";
    await agentFor(c, steerer, { pull: "all" });
    const first = await host.postEvent(messageEvent(c, "hold first"));
    expect(first.body.disposition).toBe("started");
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");

    const second = await host.postEvent(messageEvent(c, "second", { event_id: "steer-all-2" }));
    const third = await host.postEvent(messageEvent(c, "third", { event_id: "steer-all-3" }));
    for (const r of [second, third]) expect(r.body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    // A steered event still answers duplicate with the run that claimed it, and starts nothing.
    expect((await host.postEvent(messageEvent(c, "second", { event_id: "steer-all-2" }))).body).toMatchObject({ disposition: "duplicate", run_id: first.body.run_id });

    gate(c).resolve();
    const out = await reply(first.body.run_id!);
    expect(out.pulled).toEqual(["second", "third"]);
    expect(out.pulled_items[0]).toMatchObject({ claimed_run_id: first.body.run_id, runner_id: steerer.runnerId(), event: { event_id: "steer-all-2" }, actor: { actor_id: "u1" } });
    expect(startedTexts(c)).toEqual(["hold first"]);

    const log = await eventLogOf(c);
    const claimed = log.find((e) => e.event_id === "steer-all-2");
    expect(claimed.metadata.steering).toMatchObject({ status: "queued", trigger_behavior: "absorbed_into_active_run", claimed_by_run_id: first.body.run_id, claimed_runner_id: steerer.runnerId() });
    expect(Date.parse(claimed.metadata.steering.claimed_at)).not.toBeNaN();
    const injected = log.filter((e) => e.event_type === "steering.injected").map((e) => e.metadata.source_event_id);
    expect(injected.sort()).toEqual(["steer-all-2", "steer-all-3"]);
    expect(log.filter((e) => e.event_type === "steering.dropped")).toEqual([]);
    // Facts do not change: the steered messages are in the transcript too.
    expect(log.filter((e) => e.event_type === "message.received").map((e) => e.input_summary)).toEqual(expect.arrayContaining(["second", "third"]));
  });

  it("pulls one at a time, and records every item never pulled as dropped when the run ends (then answered all the same)", async () => {
    const c = "steer-one";
    await agentFor(c, steerer, { pull: "one" });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    for (const n of ["a", "b", "c"]) expect((await host.postEvent(messageEvent(c, n, { event_id: `steer-one-${n}` }))).body.disposition).toBe("steered");
    gate(c).resolve();
    expect((await reply(first.body.run_id!)).pulled).toEqual(["a"]);
    // Decided anew in claim order: b in a run of its own, which c is steered into.
    expect(await reply(await decidedAnew("steer-one-b"))).toMatchObject({ text: "b", pulled: ["c"] });
    const log = await eventLogOf(c);
    expect(log.filter((e) => e.event_type === "steering.injected").map((e) => e.metadata.source_event_id).sort()).toEqual(["steer-one-a", "steer-one-c"]);
    expect(log.filter((e) => e.event_type === "steering.dropped").map((e) => e.metadata.source_event_id).sort()).toEqual(["steer-one-b", "steer-one-c"]);
  });

  it("drops everything claimed by a run that never pulls (then answers it in a run of its own)", async () => {
    const c = "steer-never";
    await agentFor(c, steerer, { pull: "never" });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    expect((await host.postEvent(messageEvent(c, "lost", { event_id: "steer-never-1" }))).body.disposition).toBe("steered");
    gate(c).resolve();
    expect((await reply(first.body.run_id!)).pulled).toEqual([]);
    expect(await reply(await decidedAnew("steer-never-1"))).toMatchObject({ text: "lost", pulled: [] });
    const log = await eventLogOf(c);
    expect(log.filter((e) => e.event_type === "steering.dropped")).toHaveLength(1);
    expect(log.find((e) => e.event_type === "steering.dropped").metadata).toMatchObject({ source_event_id: "steer-never-1", run_id: first.body.run_id });
  });

  it("falls back to the strategy (enqueue) when the steering queue is full", async () => {
    const c = "steer-full";
    await agentFor(c, steerer, { pull: "all" });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    const dispositions: string[] = [];
    for (let i = 0; i < 100; i += 10) {
      const batch = await Promise.all(Array.from({ length: 10 }, (_, j) => host.postEvent(messageEvent(c, `m${i + j}`))));
      dispositions.push(...batch.map((r) => r.body.disposition));
    }
    expect(dispositions.every((d) => d === "steered")).toBe(true);
    const overflow = await host.postEvent(messageEvent(c, "overflow"));
    expect(overflow.body.disposition).toBe("queued");
    gate(c).resolve();
    expect((await reply(first.body.run_id!)).pulled).toHaveLength(100);
    expect((await reply(overflow.body.run_id!)).text).toBe("overflow");
  });

  it("debounce: a burst of messages lands in the steering queue of the run being started, so one run answers it", async () => {
    const c = "burst-steer";
    await agentFor(c, steerer, { pull: "all", concurrency: { debounce_ms: 600 } });
    // Held (it pulls once released) until the burst is answered: a POST slower than the window must not find the run
    // already ended, or pulled before it came.
    const first = await host.postEvent(messageEvent(c, "hold one"));
    const rest = [await host.postEvent(messageEvent(c, "two")), await host.postEvent(messageEvent(c, "three"))];
    gate(c).resolve();
    expect(first.body.disposition).toBe("started");
    for (const r of rest) expect(r.body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    const out = await reply(first.body.run_id!);
    expect(out).toMatchObject({ text: "hold one", pulled: ["two", "three"] });
    expect(startedTexts(c)).toEqual(["hold one"]);
  });

  it("debounce slides: each message of the burst claimed by the waiting run delays its start again, so one run answers lines typed further apart than the window", async () => {
    const c = "burst-slides";
    await agentFor(c, steerer, { pull: "all", concurrency: { debounce_ms: 1000 } });
    const first = await host.postEvent(messageEvent(c, "one"));
    const rest = [];
    let lastAt = 0;
    // 1.5 s in all, each line 500 ms after the one before: a window fixed at the first line would have closed.
    for (const text of ["two", "three", "four"]) {
      await new Promise((r) => setTimeout(r, 500));
      lastAt = Date.now();
      rest.push(await host.postEvent(messageEvent(c, text)));
    }
    for (const r of rest) expect(r.body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    expect(await reply(first.body.run_id!)).toMatchObject({ text: "one", pulled: ["two", "three", "four"] });
    expect(startedTexts(c)).toEqual(["one"]);
    // The window ran from the last line of the burst (sent at lastAt, decided after).
    expect(startedAt.get(c)![0]).toBeGreaterThanOrEqual(lastAt + 950);
  });

  it("debounce slides no further than debounce_max_ms from the burst's first message", async () => {
    const c = "burst-max-wait";
    const refused = await host.admin("POST", "/v1/admin/agents", { agent_id: `bad-${c}`, name: c, runner_id: steerer.runnerId(), event_types: ["message.received"], concurrency: { debounce_ms: 1000, debounce_max_ms: 500 } });
    expect(refused).toMatchObject({ status: 400, body: { error: { code: "invalid_request", message: expect.stringContaining("debounce_max_ms is at least debounce_ms") } } });
    // Under steer the burst's messages slide its run's window; under interrupt each supersedes the run before it, which
    // starts its own window again: bounded alike.
    for (const [strategy, runner] of [["steer", steerer], ["interrupt", plain]] as const) {
      const conversation = `${c}-${strategy}`;
      await agentFor(conversation, runner, { pull: "all", concurrency: { strategy, debounce_ms: 600, debounce_max_ms: 1500 } });
      const t0 = Date.now();
      await host.postEvent(messageEvent(conversation, "m0"));
      // A line every 300 ms for 3 s: the window would keep sliding past 3.6 s without a bound. Lines after a run began
      // can no longer move its start: the burst stops there.
      for (let i = 1; i <= 10 && startedTexts(conversation).length === 0; i++) {
        await new Promise((r) => setTimeout(r, 300));
        await host.postEvent(messageEvent(conversation, `m${i}`));
      }
      await waitFor(() => startedTexts(conversation).length > 0, 10_000, "a run of the burst to start");
      const began = startedAt.get(conversation)![0] - t0;
      expect({ strategy, began }).toEqual({ strategy, began: expect.toSatisfy((ms: number) => ms >= 1400 && ms < 2600) });
    }
  });
});

describe("concurrency strategies for a busy conversation", () => {
  it("enqueue (default without steering): waits for the active run, then starts in arrival order", async () => {
    const c = "enqueue";
    await agentFor(c, plain);
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    const second = await host.postEvent(messageEvent(c, "second"));
    const third = await host.postEvent(messageEvent(c, "third"));
    expect([second.body.disposition, third.body.disposition]).toEqual(["queued", "queued"]);
    await new Promise((r) => setTimeout(r, 200));
    expect(startedTexts(c)).toEqual(["hold"]);
    gate(c).resolve();
    for (const r of [first, second, third]) expect((await host.waitForRun(r.body.run_id!)).status).toBe("completed");
    expect(startedTexts(c)).toEqual(["hold", "second", "third"]);
  });

  it("enqueue chosen explicitly for a steering runner: nothing is claimed", async () => {
    const c = "enqueue-steerer";
    await agentFor(c, steerer, { pull: "all", concurrency: { strategy: "enqueue" } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    const second = await host.postEvent(messageEvent(c, "second"));
    expect(second.body.disposition).toBe("queued");
    gate(c).resolve();
    expect(await reply(first.body.run_id!)).toMatchObject({ can_pull: false, pulled: [] });
    expect((await reply(second.body.run_id!)).text).toBe("second");
  });

  it("interrupt: cancels the active run, then starts the new one", async () => {
    const c = "interrupt";
    await agentFor(c, plain, { concurrency: { strategy: "interrupt" } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    const second = await host.postEvent(messageEvent(c, "newer"));
    expect(second.body.disposition).toBe("started");
    const ended = await host.waitForRun(first.body.run_id!);
    expect(ended).toMatchObject({ status: "cancelled", error: { code: "cancelled" } });
    expect((await reply(second.body.run_id!)).text).toBe("newer");
    expect(startedTexts(c)).toEqual(["hold", "newer"]);
  });

  it("interrupt burst: each newer event supersedes the older ones, and only the newest runs to the end", async () => {
    const c = "interrupt-burst";
    await agentFor(c, plain, { concurrency: { strategy: "interrupt" } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    const burst = [];
    // The older ones hold if they start, so each is cancelled (running) or superseded (waiting), never completed.
    for (const text of ["hold b1", "hold b2", "b3"]) burst.push(await host.postEvent(messageEvent(c, text)));
    const last = burst[burst.length - 1];
    expect((await reply(last.body.run_id!)).text).toBe("b3");
    for (const r of [first, ...burst.slice(0, -1)]) expect(await host.waitForRun(r.body.run_id!)).toMatchObject({ status: "cancelled", error: { code: "cancelled" } });
    expect(startedTexts(c)[0]).toBe("hold");
    expect(startedTexts(c).at(-1)).toBe("b3");
  });

  it("interrupt burst sent at once: the decisions take turns, so exactly one of the burst survives", async () => {
    const c = "interrupt-at-once";
    await agentFor(c, plain, { concurrency: { strategy: "interrupt" } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    const burst = await Promise.all(Array.from({ length: 6 }, (_, i) => host.postEvent(messageEvent(c, `hold b${i}`))));
    const ids = [first, ...burst].map((r) => r.body.run_id!);
    const statusOf = async (id: string) => (await host.admin("GET", `/v1/runs/${id}`)).body.status as string;
    // Every run but one ends cancelled while they all would still hold.
    const live = async () => (await Promise.all(ids.map(statusOf))).filter((s) => s === "created" || s === "running").length;
    const end = Date.now() + 10_000;
    while ((await live()) > 1 && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
    expect(await live()).toBe(1);
    gate(c).resolve();
    const ended = await Promise.all(ids.map((id) => host.waitForRun(id)));
    expect(ended.filter((r) => r.status === "completed")).toHaveLength(1);
    expect(ended.filter((r) => r.status === "cancelled")).toHaveLength(ids.length - 1);
  });

  it("interrupt and reject apply to messages (§10): an event that is no message (a join) waits its turn, cancelling nothing", async () => {
    for (const strategy of ["interrupt", "reject"]) {
      const c = `${strategy}-join`;
      await putAgent(host, { agent_id: `agent-${c}`, runner_id: plain.runnerId(), runner_config: { pull: "never" }, event_types: ["message.received", "group.member_joined"], scope: { type: "conversation", id: c }, concurrency: { strategy } });
      const first = await host.postEvent(messageEvent(c, "hold"));
      await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
      const joined = await host.postEvent({ event_type: "group.member_joined", conversation_id: c, actor: { actor_type: "user", actor_id: "newcomer" } });
      expect(joined.body.disposition).toBe("queued");
      gate(c).resolve();
      expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
      expect((await host.waitForRun(joined.body.run_id!)).status).toBe("completed");
    }
  });

  it("interrupt supersedes only its own agent's runs: another agent's run goes on, and the interrupting run is next once it ends, ahead of the runs waiting their turn", async () => {
    const c = "interrupt-other-agent";
    await putAgent(host, { agent_id: `chat-${c}`, runner_id: plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: c }, concurrency: { strategy: "enqueue" } });
    await putAgent(host, { agent_id: `api-${c}`, runner_id: plain.runnerId(), runner_config: { pull: "never" }, event_types: ["api.invoked"], scope: { type: "conversation", id: c }, concurrency: { strategy: "interrupt" } });
    const held = await host.postEvent(messageEvent(c, "hold chat"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the chat run to start");
    const waiting = await host.postEvent(messageEvent(c, "waiting"));
    const invoked = await host.postEvent({ ...messageEvent(c, "invoked"), event_type: "api.invoked" });
    // Told the truth: it waits for the chat run, which it does not cancel.
    expect([waiting.body.disposition, invoked.body.disposition]).toEqual(["queued", "queued"]);
    await new Promise((r) => setTimeout(r, 300));
    expect((await host.admin("GET", `/v1/runs/${held.body.run_id}`)).body.status).toBe("running");
    gate(c).resolve();
    for (const r of [held, invoked, waiting]) expect((await host.waitForRun(r.body.run_id!)).status).toBe("completed");
    expect(startedTexts(c)).toEqual(["hold chat", "invoked", "waiting"]);
  });

  it("interrupt spares another agent's run waiting out its debounce, and the messages it claimed: they are answered, not dropped", async () => {
    const c = "interrupt-spares-burst";
    await putAgent(host, { agent_id: `chat-${c}`, runner_id: steerer.runnerId(), runner_config: { pull: "all" }, scope: { type: "conversation", id: c }, concurrency: { strategy: "steer", debounce_ms: 800 } });
    await putAgent(host, { agent_id: `api-${c}`, runner_id: plain.runnerId(), runner_config: { pull: "never" }, event_types: ["api.invoked"], scope: { type: "conversation", id: c }, concurrency: { strategy: "interrupt" } });
    // Held until the invocation is answered, so a slow POST never finds the burst's run over (or past its pull).
    const first = await host.postEvent(messageEvent(c, "hold one"));
    const second = await host.postEvent(messageEvent(c, "two"));
    expect([first.body.disposition, second.body.disposition]).toEqual(["started", "steered"]);
    const invoked = await host.postEvent({ ...messageEvent(c, "invoked"), event_type: "api.invoked" });
    gate(c).resolve();
    // The burst's run was answered started: it is not overtaken either.
    expect(invoked.body.disposition).toBe("queued");
    expect(await reply(first.body.run_id!)).toMatchObject({ text: "hold one", pulled: ["two"] });
    expect((await host.waitForRun(invoked.body.run_id!)).status).toBe("completed");
    expect(startedTexts(c)).toEqual(["hold one", "invoked"]);
  });

  it("interrupt answered queued behind another agent's interrupting run still in its debounce window waits for it, never overtaking it", async () => {
    const c = "interrupt-behind-debounced-interrupt";
    await putAgent(host, { agent_id: `chat-${c}`, runner_id: plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: c }, concurrency: { strategy: "interrupt", debounce_ms: 800 } });
    await putAgent(host, { agent_id: `api-${c}`, runner_id: plain.runnerId(), runner_config: { pull: "never" }, event_types: ["api.invoked"], scope: { type: "conversation", id: c }, concurrency: { strategy: "interrupt" } });
    // Held until the invocation is answered: a POST slower than the window must not find the conversation idle.
    const first = await host.postEvent(messageEvent(c, "hold one"));
    const invoked = await host.postEvent({ ...messageEvent(c, "invoked"), event_type: "api.invoked" });
    gate(c).resolve();
    expect([first.body.disposition, invoked.body.disposition]).toEqual(["started", "queued"]);
    for (const r of [first, invoked]) expect((await host.waitForRun(r.body.run_id!)).status).toBe("completed");
    expect(startedTexts(c)).toEqual(["hold one", "invoked"]);
  });

  it("interrupt supersedes what was asked, not a notification: a join, waiting out its debounce or being answered, is answered once, and so is the message", async () => {
    for (const joinHeld of [false, true]) {
      const c = `interrupt-join-${joinHeld ? "active" : "debounced"}`;
      await putAgent(host, {
        agent_id: `agent-${c}`,
        runner_id: plain.runnerId(),
        // Held either way (until just after the message is answered): a message slower than the debounce must not
        // find the welcome already over.
        runner_config: { pull: "never", hold_joins: true },
        event_types: ["message.received", "group.member_joined"],
        scope: { type: "conversation", id: c },
        concurrency: { strategy: "interrupt", ...(joinHeld ? {} : { debounce_ms: 500 }) },
      });
      const joined = await host.postEvent({ event_type: "group.member_joined", conversation_id: c, actor: { actor_type: "user", actor_id: "newcomer" } });
      expect(joined.body.disposition).toBe("started");
      if (joinHeld) await waitFor(() => startedTexts(c).length === 1, 10_000, "the welcome to start");
      const message = await host.postEvent(messageEvent(c, "hello"));
      expect(message.body.disposition).toBe("queued");
      setTimeout(() => gate(c).resolve(), 300);
      expect((await host.waitForRun(joined.body.run_id!)).status).toBe("completed");
      expect((await host.waitForRun(message.body.run_id!)).status).toBe("completed");
      expect(startedTexts(c)).toEqual(["", "hello"]);
    }
  });

  it("reject: records the event, answers rejected and runs nothing", async () => {
    const c = "reject";
    await agentFor(c, plain, { concurrency: { strategy: "reject" } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    const second = await host.postEvent(messageEvent(c, "refused", { event_id: "reject-2" }));
    expect(second.status).toBe(202);
    expect(second.body).toMatchObject({ disposition: "rejected", run_id: null });
    gate(c).resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const runs = await host.admin("GET", `/v1/runs?conversation_id=${c}`);
    expect(runs.body.items).toHaveLength(1);
    const log = await eventLogOf(c);
    expect(log.find((e) => e.event_id === "reject-2")).toMatchObject({ input_summary: "refused" });
    // Why, as GET /v1/events says it: the agent's strategy, and the run that made the conversation busy.
    const recorded = await host.admin("GET", "/v1/events/reject-2");
    expect([recorded.body.disposition, recorded.body.metadata.rejection]).toEqual(["rejected", { reason: "concurrency_strategy", strategy: "reject", busy_run_id: first.body.run_id }]);
    expect(startedTexts(c)).toEqual(["hold", "report"]);
  });

  it("parallel: starts another run at once", async () => {
    const c = "parallel";
    await agentFor(c, plain, { concurrency: { strategy: "parallel" } });
    const first = await host.postEvent(messageEvent(c, "hold one"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    const second = await host.postEvent(messageEvent(c, "hold two"));
    expect(second.body.disposition).toBe("started");
    await waitFor(() => startedTexts(c).length === 2, 10_000, "the second run to start while the first is busy");
    gate(c).resolve();
    for (const r of [first, second]) expect((await host.waitForRun(r.body.run_id!)).status).toBe("completed");
  });

  it("debounce without steering: the burst is handled by the strategy (enqueue), one run per message", async () => {
    const c = "burst-plain";
    await agentFor(c, plain, { concurrency: { debounce_ms: 300 } });
    const t0 = Date.now();
    // The first run is held until the second message is answered: on a loaded machine the second POST can take longer
    // than the window and the first run together, and would find the conversation idle (started, not queued).
    const first = await host.postEvent(messageEvent(c, "hold one"));
    const second = await host.postEvent(messageEvent(c, "two"));
    gate(c).resolve();
    expect([first.body.disposition, second.body.disposition]).toEqual(["started", "queued"]);
    await reply(second.body.run_id!);
    expect(startedTexts(c)).toEqual(["hold one", "two"]);
    expect(startedAt.get(c)![0] - t0).toBeGreaterThanOrEqual(300);
  });
});
