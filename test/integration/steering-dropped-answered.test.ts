import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, keyedGates } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * README "Steering": a run that ends with claimed messages it never pulled (its runner skipped the last pull, or the
 * run failed, or an operator cancelled it) records each as `steering.dropped` (PROTOCOL §10), and then has them
 * answered: each is decided anew, in claim order, once. Not so for a run an interrupt stopped (the newer message is
 * answered instead), nor for a message whose agent can no longer answer it.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** The texts each conversation's runs started with, in call order. */
const started = new Map<string, string[]>();
const { gate, releaseAll } = keyedGates();
const startedIn = (c: string) => started.get(c) ?? [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "no-last-pull",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const c: string = ctx.conversation.conversation_id;
      const text: string = ctx.input.text ?? "";
      started.set(c, [...startedIn(c), text]);
      // "hold…": busy until the test lets go, then ends without pulling (the last pull README asks for is skipped). "hold too": its own gate.
      if (text.startsWith("hold")) {
        await gate(text === "hold too" ? `${c}/too` : c).promise;
        if (text === "hold, then fail") {
          w.send("run.failed", { code: "test.failed", error: "gave up", retryable: false });
          return void res.end();
        }
        return w.reply("held");
      }
      // Any other run pulls once before it completes, as README asks (when its agent steers).
      const pulled = ctx.context.available_apis.steering_pull === true ? (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull")).body.data.items : [];
      w.reply(JSON.stringify({ text, pulled: pulled.map((i: { input: { text: string } }) => i.input.text) }));
    },
  });
  // A retry pause well past the second the busy tests keep the database away: a message still steered once it is back shows no retry came meanwhile.
  host = await startTestHost({ vars: { DB_RETRY_PAUSE_MS: "3000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  releaseAll();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

const agentFor = (c: string, concurrency: Record<string, unknown> = {}, enabled = true) =>
  putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c }, concurrency, enabled });
const eventOf = async (id: string) => (await host.admin<{ disposition: string; run_id: string | null }>("GET", `/v1/events/${id}`)).body;
const answerOf = async (runId: string) => JSON.parse(String((await host.waitForRun(runId)).message?.content));
/** The steering records of conversation `c`, oldest first, as `type:source_event_id@run`. */
async function outcomes(c: string, runs: Record<string, string>) {
  const rows = await host.query<{ t: string; src: string; run: string }>(
    "SELECT event_type AS t, json_extract(data_json, '$.source_event_id') AS src, json_extract(data_json, '$.run_id') AS run FROM event_log WHERE conversation_id = ? AND event_type LIKE 'steering.%' ORDER BY seq",
    [c],
  );
  const named = Object.fromEntries(Object.entries(runs).map(([name, id]) => [id, name]));
  return rows.map((r) => `${r.t}:${r.src}@${named[r.run] ?? r.run}`);
}

/** A run of `c` holding with `text` until let go, and `claimed` messages steered into it; answers the held run's id. */
async function heldWithClaims(c: string, claimed: string[], text = "hold") {
  const first = await host.postEvent(messageEvent(c, text));
  await waitFor(() => startedIn(c).length === 1, 10_000, "the held run to start");
  for (const n of claimed) expect((await host.postEvent(messageEvent(c, n, { event_id: `${c}-${n}` }))).body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
  return first.body.run_id!;
}

/** The run the event `id` is bound to once decided anew. */
async function ownRunOf(id: string): Promise<string> {
  await waitFor(async () => (await eventOf(id)).disposition === "bound", 10_000, `${id} decided anew`);
  return (await eventOf(id)).run_id!;
}

describe("messages a run claimed and ended without pulling", () => {
  it("are answered: decided anew in claim order, the first in a run of its own that the later ones are steered into", async () => {
    const c = "dropped-steer";
    await agentFor(c);
    const held = await heldWithClaims(c, ["a", "b", "c"]);
    gate(c).resolve();
    expect((await host.waitForRun(held)).status).toBe("completed");
    const own = await ownRunOf(`${c}-a`);
    expect(await answerOf(own)).toEqual({ text: "a", pulled: ["b", "c"] });
    for (const n of ["b", "c"]) expect(await eventOf(`${c}-${n}`)).toMatchObject({ disposition: "steered", run_id: own });
    // The §10 fact stays: each was dropped by the held run; then pulled by the run that answers them.
    expect(await outcomes(c, { held, own })).toEqual([`steering.dropped:${c}-a@held`, `steering.dropped:${c}-b@held`, `steering.dropped:${c}-c@held`, `steering.injected:${c}-b@own`, `steering.injected:${c}-c@own`]);
    // Once each: sent again, a message is a duplicate of the run that answers it.
    expect((await host.postEvent(messageEvent(c, "a", { event_id: `${c}-a` }))).body).toMatchObject({ disposition: "duplicate", run_id: own });
    await new Promise((r) => setTimeout(r, 300));
    expect(startedIn(c)).toEqual(["hold", "a"]);
  });

  it("take their turns as the agent's strategy says now: each its own run, in claim order, under enqueue", async () => {
    const c = "dropped-enqueue";
    await agentFor(c);
    const held = await heldWithClaims(c, ["a", "b", "c"]);
    await agentFor(c, { strategy: "enqueue" });
    gate(c).resolve();
    await host.waitForRun(held);
    const runs = [await ownRunOf(`${c}-a`), await ownRunOf(`${c}-b`), await ownRunOf(`${c}-c`)];
    for (const [i, n] of ["a", "b", "c"].entries()) expect(await answerOf(runs[i])).toEqual({ text: n, pulled: [] });
    expect(startedIn(c)).toEqual(["hold", "a", "b", "c"]);
  });

  it("of a run that failed are answered", async () => {
    const c = "dropped-failed";
    await agentFor(c);
    const held = await heldWithClaims(c, ["a"], "hold, then fail");
    gate(c).resolve();
    expect((await host.waitForRun(held)).status).toBe("failed");
    expect(await answerOf(await ownRunOf(`${c}-a`))).toEqual({ text: "a", pulled: [] });
  });

  it("of a run an operator cancelled are answered; of one an interrupt stopped they stay dropped, the interrupting message answered instead", async () => {
    const [cancelled, interrupted] = ["dropped-cancelled", "dropped-interrupted"];
    await agentFor(cancelled);
    await agentFor(interrupted);
    const heldCancelled = await heldWithClaims(cancelled, ["a"]);
    const heldInterrupted = await heldWithClaims(interrupted, ["a", "b"]);
    expect((await host.admin("POST", `/v1/runs/${heldCancelled}/cancel`)).status).toBe(202);
    await agentFor(interrupted, { strategy: "interrupt" });
    const newer = await host.postEvent(messageEvent(interrupted, "newer"));
    expect((await host.waitForRun(heldCancelled)).status).toBe("cancelled");
    expect((await host.waitForRun(heldInterrupted)).status).toBe("cancelled");
    expect(await answerOf(await ownRunOf(`${cancelled}-a`))).toEqual({ text: "a", pulled: [] });
    expect(await answerOf(newer.body.run_id!)).toEqual({ text: "newer", pulled: [] });
    await new Promise((r) => setTimeout(r, 500));
    expect(startedIn(interrupted)).toEqual(["hold", "newer"]);
    for (const n of ["a", "b"]) expect(await eventOf(`${interrupted}-${n}`)).toMatchObject({ disposition: "steered", run_id: heldInterrupted });
    expect(await outcomes(interrupted, { held: heldInterrupted })).toEqual([`steering.dropped:${interrupted}-a@held`, `steering.dropped:${interrupted}-b@held`]);
  });

  it("are answered only while their agent can answer them: not once it is disabled", async () => {
    const [kept, disabled] = ["dropped-agent-kept", "dropped-agent-disabled"];
    await agentFor(kept);
    await agentFor(disabled);
    const heldKept = await heldWithClaims(kept, ["a"]);
    const heldDisabled = await heldWithClaims(disabled, ["a"]);
    await agentFor(disabled, {}, false);
    gate(kept).resolve();
    gate(disabled).resolve();
    await Promise.all([host.waitForRun(heldKept), host.waitForRun(heldDisabled)]);
    expect(await answerOf(await ownRunOf(`${kept}-a`))).toEqual({ text: "a", pulled: [] });
    await new Promise((r) => setTimeout(r, 500));
    expect(startedIn(disabled)).toEqual(["hold"]);
    expect(await eventOf(`${disabled}-a`)).toMatchObject({ disposition: "steered", run_id: heldDisabled });
    expect(await outcomes(disabled, { held: heldDisabled })).toEqual([`steering.dropped:${disabled}-a@held`]);
  });

  it("are answered once the database is back, if it was away when they were to be decided anew, and once only", async () => {
    const c = "dropped-db-away";
    await agentFor(c);
    const held = await heldWithClaims(c, ["a", "b"]);
    // Taking the first back fails, twice: the scheduler tries again after a pause.
    host.databaseOutage({ queries: 2, matching: "json_remove" });
    gate(c).resolve();
    await host.waitForRun(held);
    const own = await ownRunOf(`${c}-a`);
    expect(await answerOf(own)).toEqual({ text: "a", pulled: ["b"] });
    await new Promise((r) => setTimeout(r, 300));
    expect(startedIn(c)).toEqual(["hold", "a"]);
  }, 30_000);

  // The conversation still busy (a parallel run holding) when the database comes back: the retry comes after its pause, not when that run ends.
  // Taking a message back is the write that removes its `steering` note (its other statements are like a run's end's).
  for (const [what, name, sql] of [["their drop's record", "record", "steering.dropped"], ["taking them back", "release", "'$.steering')"]])
    it(`are answered within a retry pause of the database coming back, if ${what} failed while another run of the conversation is busy`, async () => {
      const c = `dropped-busy-${name}`;
      await agentFor(c);
      const held = await heldWithClaims(c, ["a"]);
      await agentFor(c, { strategy: "parallel" });
      const busy = (await host.postEvent(messageEvent(c, "hold too"))).body;
      expect(busy.disposition).toBe("started");
      await waitFor(() => startedIn(c).length === 2, 10_000, "the busy run to start");
      // Every try fails for a second (the held run's end, and each look the scheduler takes meanwhile).
      host.databaseOutage({ queries: 1_000, matching: sql });
      gate(c).resolve();
      await host.waitForRun(held);
      await new Promise((r) => setTimeout(r, 1_000));
      host.databaseOutage({ queries: 0 });
      expect(await eventOf(`${c}-a`)).toMatchObject({ disposition: "steered", run_id: held });
      await waitFor(async () => (await eventOf(`${c}-a`)).disposition === "bound", 9_000, "the message decided anew, the busy run still holding");
      expect(await answerOf((await eventOf(`${c}-a`)).run_id!)).toEqual({ text: "a", pulled: [] });
      expect((await host.admin("GET", `/v1/runs/${busy.run_id}`)).body.status).toBe("running");
      gate(`${c}/too`).resolve();
      expect((await host.waitForRun(busy.run_id!)).status).toBe("completed");
    }, 30_000);
});
