import { join } from "node:path";
import { createClient } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { messageEvent, startHostOn, waitForRunOn } from "../support/host";
import { callHostApi, deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useDataDir } from "../support/restart-host";

/**
 * A host restarted while a steering run holds claimed messages. README: "each item still queued when the run ends
 * gets a steering.dropped record", and is then decided anew; a message steered into a run is never lost silently. A
 * pull whose libSQL write was in flight when the instance died never reached the runner: the item must still get an
 * outcome.
 */
const dataDir = useDataDir("agent-host-restart-steer-");
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const started: { runId: string; text: string; pull: () => Promise<unknown> }[] = [];
const pullNow = deferred();
const pullOne = deferred();
const never = deferred();

const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }];
const start = (watchdogMs = 1000) =>
  startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: String(watchdogMs), DB_QUERY_TIMEOUT_MS: "30000" });

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "steerer",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const pull = () => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
      started.push({ runId: ctx.run_id, text: ctx.input.text, pull });
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "hold and pull") {
        await pullNow.promise;
        await pull().catch(() => undefined);
      }
      if (ctx.input.text === "hold and pull one") {
        await pullOne.promise;
        await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "one-at-a-time" }).catch(() => undefined);
      }
      if (ctx.input.text.startsWith("hold")) await never.promise;
      // Ends without the last pull README asks for: what it claimed meanwhile is dropped.
      if (ctx.input.text === "end in a while") await new Promise((r) => setTimeout(r, 1_000));
      if (ctx.input.text === "pull in a while") {
        await new Promise((r) => setTimeout(r, 2_000));
        const pulled = (await pull()).body.data.items.map((i: { event: { event_id: string } }) => i.event.event_id);
        return w.reply(JSON.stringify(pulled));
      }
      w.reply(`done: ${ctx.input.text}`);
    },
  });
});
afterAll(async () => {
  never.resolve();
  pullNow.resolve();
  pullOne.resolve();
  await runner?.close();
});


async function untilStarted(n: number) {
  const end = Date.now() + 10_000;
  while (started.length < n) {
    if (Date.now() > end) throw new Error("runner was never called");
    await new Promise((r) => setTimeout(r, 10));
  }
  return started[n - 1];
}

/** The run of its own a dropped message is decided anew into (README "Steering"), once its event is bound to it. */
async function decidedAnew(host: LocalHost, eventId: string): Promise<string> {
  const end = Date.now() + 15_000;
  for (;;) {
    const event = (await adminCall<{ disposition: string; run_id: string }>(host, "GET", `/v1/events/${eventId}`)).body;
    if (event.disposition === "bound") return event.run_id;
    if (Date.now() > end) throw new Error(`${eventId} was not decided anew: ${JSON.stringify(event)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const outcomes = (host: LocalHost, eventId: string) =>
  host.query<{ event_type: string }>("SELECT event_type FROM event_log WHERE event_type IN ('steering.injected', 'steering.dropped') AND data_json LIKE ?", [`%"source_event_id":"${eventId}"%`]);

async function agentFor(host: LocalHost, conv: string) {
  await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: runner.url });
  const res = await adminCall(host, "POST", "/v1/admin/agents", { agent_id: `agent-${conv}`, name: conv, runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: conv } });
  expect(res.status).toBe(201);
}

describe("steering claims of a run lost with a restart", () => {
  it("a claimed message never pulled is recorded as steering.dropped, then answered in a run of its own", async () => {
    let host = await start();
    try {
      await agentFor(host, "rs-claimed");
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("rs-claimed", "hold still"));
      await untilStarted(1);
      const steered = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("rs-claimed", "also this", { event_id: "rs-claimed-2" }));
      expect(steered.body).toMatchObject({ disposition: "steered", run_id: held.body.run_id });
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, held.body.run_id, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      const end = Date.now() + 5_000;
      while ((await outcomes(host, "rs-claimed-2")).length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect((await outcomes(host, "rs-claimed-2")).map((r) => r.event_type)).toEqual(["steering.dropped"]);
      expect((await waitForRunOn(host, await decidedAnew(host, "rs-claimed-2"), 15_000)).message?.content).toBe("done: also this");
    } finally {
      await host.dispose();
    }
  });

  it("a message whose pull was in flight (its write unanswered) when the instance died is not lost silently", async () => {
    let host = await start();
    try {
      await agentFor(host, "rs-pulling");
      const before = started.length;
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("rs-pulling", "hold and pull"));
      await untilStarted(before + 1);
      const steered = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("rs-pulling", "and this", { event_id: "rs-pulling-2" }));
      expect(steered.body).toMatchObject({ disposition: "steered", run_id: held.body.run_id });
      // The pull takes the item off the queue, then its libSQL write (steering.injected) gets no answer: the instance dies.
      host.databaseOutage("hang");
      pullNow.resolve();
      await new Promise((r) => setTimeout(r, 800));
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, held.body.run_id, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      // The runner never received it (its pull got no answer): the run's end records it as dropped.
      const end = Date.now() + 5_000;
      while ((await outcomes(host, "rs-pulling-2")).length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect((await outcomes(host, "rs-pulling-2")).map((r) => r.event_type)).toEqual(["steering.dropped"]);
    } finally {
      await host.dispose();
    }
  });

  it("a message whose claim was being written when the instance died is run as its own, whether that write landed or not", async () => {
    let host = await start();
    const claimedEvents = ["rs-dying-landed", "rs-dying-not-landed"];
    const held: string[] = [];
    const posted: Promise<unknown>[] = [];
    try {
      for (const conv of claimedEvents) {
        await agentFor(host, conv);
        const before = started.length;
        held.push((await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent(conv, "hold on"))).body.run_id);
        await untilStarted(before + 1);
      }
      // Both claims' libSQL writes are held; the instance dies meanwhile.
      host.databaseOutage({ delayMs: 5_000, matching: "absorbed_into_active_run", queries: 2 });
      for (const conv of claimedEvents) posted.push(adminCall(host, "POST", "/v1/events", messageEvent(conv, `claimed as it died: ${conv}`, { event_id: conv })).catch(() => undefined));
      await new Promise((r) => setTimeout(r, 700));
      await host.dispose();
      await Promise.all(posted);
      // The first claim's write had reached the database and was applied (only its answer was lost with the instance).
      const db = createClient({ url: `file:${join(dataDir.path, "host.db")}` });
      try {
        const own = (await db.execute({ sql: "SELECT run_id FROM event_log WHERE event_id = ?", args: [claimedEvents[0]] })).rows[0].run_id as string;
        const steering = { status: "queued", trigger_behavior: "absorbed_into_active_run", claimed_by_run_id: held[0], claimed_runner_id: runner.runnerId(), claimed_at: new Date().toISOString() };
        await db.batch([
          { sql: "UPDATE event_log SET disposition = 'steered', run_id = ?, metadata_json = json_patch(metadata_json, ?) WHERE event_id = ?", args: [held[0], JSON.stringify({ steering }), claimedEvents[0]] },
          { sql: "DELETE FROM run WHERE run_id = ? AND status = 'created'", args: [own] },
        ]);
      } finally {
        db.close();
      }
      host = await start();
      for (const [i, conv] of claimedEvents.entries()) {
        expect(await waitForRunOn(host, held[i], 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
        // Never answered `steered` (the ingress call failed with the instance): the event goes back to its own run, which runs it.
        const end = Date.now() + 10_000;
        let event = (await adminCall<{ disposition: string; run_id: string | null }>(host, "GET", `/v1/events/${conv}`)).body;
        while (event.disposition !== "bound" && Date.now() < end) {
          await new Promise((r) => setTimeout(r, 50));
          event = (await adminCall<{ disposition: string; run_id: string | null }>(host, "GET", `/v1/events/${conv}`)).body;
        }
        expect(event.disposition).toBe("bound");
        expect((await waitForRunOn(host, event.run_id!, 15_000)).message?.content).toBe(`done: claimed as it died: ${conv}`);
        expect(await outcomes(host, conv)).toEqual([]);
      }
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("a message its run dropped unpulled is answered once, also when the instance dies between the drop's record and its new decision", async () => {
    let host = await start();
    const conv = "rs-decided-anew";
    try {
      await agentFor(host, conv);
      const before = started.length;
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent(conv, "end in a while"));
      await untilStarted(before + 1);
      // Taking the claim back (its event bound to its own run again) is held in the database; the instance dies meanwhile.
      host.databaseOutage({ delayMs: 5_000, matching: "json_remove" });
      const steered = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent(conv, "answer me", { event_id: `${conv}-2` }));
      expect(steered.body).toMatchObject({ disposition: "steered", run_id: held.body.run_id });
      expect((await waitForRunOn(host, held.body.run_id)).status).toBe("completed");
      const end = Date.now() + 5_000;
      while ((await outcomes(host, `${conv}-2`)).length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect((await outcomes(host, `${conv}-2`)).map((r) => r.event_type)).toEqual(["steering.dropped"]);
      await new Promise((r) => setTimeout(r, 500));
      await host.dispose();
      host = await start();
      // The next instance decides it anew (its alarm, armed for that, wakes it): one run answers it.
      expect((await waitForRunOn(host, await decidedAnew(host, `${conv}-2`), 15_000)).message?.content).toBe("done: answer me");
      await new Promise((r) => setTimeout(r, 1_000));
      expect(started.filter((s) => s.text === "answer me")).toHaveLength(1);
      expect((await outcomes(host, `${conv}-2`)).map((r) => r.event_type)).toEqual(["steering.dropped"]);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("a claim the next instance is taking back while the event sent again is decided (steered) is not decided a second time", async () => {
    // No watchdog alarm due at the restart: the next instance wakes only when an event reaches it.
    let host = await start(60_000);
    const conv = "rs-taken-back-twice";
    const claimedId = "rs-taken-back-twice-1";
    const claimed = messageEvent(conv, "claimed as it died", { event_id: claimedId });
    try {
      await agentFor(host, conv);
      const before = started.length;
      await adminCall(host, "POST", "/v1/events", messageEvent(conv, "hold on"));
      await untilStarted(before + 1);
      // The claim's write never lands: the instance dies with it in flight.
      host.databaseOutage({ delayMs: 5_000, matching: "absorbed_into_active_run" });
      const posting = adminCall(host, "POST", "/v1/events", claimed).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 700));
      await host.dispose();
      await posting;
      host = await start(60_000);
      // The next instance's alarm (woken by a new message, whose run waits for it) takes the claim back; its write is slow.
      host.databaseOutage({ delayMs: 3_000, matching: "json_remove" });
      const next = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent(conv, "pull in a while"));
      await new Promise((r) => setTimeout(r, 500));
      // Meanwhile the event is sent again: taken back at once, it is steered into the run waiting to start.
      const again = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", claimed);
      expect(again.body).toMatchObject({ disposition: "duplicate", run_id: next.body.run_id });
      const run = await waitForRunOn(host, next.body.run_id, 20_000);
      expect({ status: run.status, pulled: JSON.parse(String(run.message?.content)) }).toEqual({ status: "completed", pulled: [claimedId] });
      expect((await outcomes(host, claimedId)).map((r) => r.event_type)).toEqual(["steering.injected"]);
    } finally {
      await host.dispose();
    }
  }, 60_000);
  it("a message whose claim was being written when the instance died is left by the never-handed-over sweep coming before the next instance took the claim back: it is answered", async () => {
    // No watchdog alarm due at the restart: the next instance is first reached by the cron's sweep.
    let host = await start(60_000);
    const conv = "rs-swept-while-claiming";
    const claimedId = `${conv}-1`;
    try {
      await agentFor(host, conv);
      const before = started.length;
      await adminCall(host, "POST", "/v1/events", messageEvent(conv, "hold on"));
      await untilStarted(before + 1);
      // The claim's write never lands: the instance dies with it in flight.
      host.databaseOutage({ delayMs: 5_000, matching: "absorbed_into_active_run" });
      const posting = adminCall(host, "POST", "/v1/events", messageEvent(conv, "claimed as it died", { event_id: claimedId })).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 700));
      await host.dispose();
      await posting;
      host = await start(60_000);
      // The sweep, its event recorded more than 10 minutes before (as the scheduled time has it), ends none of it.
      await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * 60_000) });
      const own = (await adminCall<{ run_id: string }>(host, "GET", `/v1/events/${claimedId}`)).body.run_id;
      expect((await waitForRunOn(host, own, 20_000)).message?.content).toBe("done: claimed as it died");
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("the claims of a run that ended while its drop waited for a pull (its write slow) are recorded dropped and answered after a restart", async () => {
    let host = await start();
    const conv = "rs-ended-drop-waiting";
    const [pulled, queued] = [`${conv}-pulled`, `${conv}-queued`];
    try {
      await agentFor(host, conv);
      const before = started.length;
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent(conv, "hold and pull one"));
      await untilStarted(before + 1);
      for (const [id, text] of [[pulled, "claimed first"], [queued, "claimed second"]]) {
        expect((await adminCall(host, "POST", "/v1/events", messageEvent(conv, text, { event_id: id }))).body).toMatchObject({ disposition: "steered", run_id: held.body.run_id });
      }
      // The pull takes the first claim off the queue; its record's write is slow. The run is cancelled meanwhile: its end
      // is recorded, and its drop waits for that pull. The instance dies before either is done.
      host.databaseOutage({ delayMs: 10_000, matching: "steering.injected" });
      pullOne.resolve();
      await new Promise((r) => setTimeout(r, 300));
      expect((await adminCall(host, "POST", `/v1/runs/${held.body.run_id}/cancel`)).status).toBe(202);
      expect((await waitForRunOn(host, held.body.run_id)).status).toBe("cancelled");
      await new Promise((r) => setTimeout(r, 500));
      await host.dispose();
      host = await start();
      // Neither message reached the runner: each is recorded dropped and answered once, in a run of its own (the second
      // was claimed first by the first's run, which never pulls here: dropped by it too).
      for (const [id, text] of [[pulled, "claimed first"], [queued, "claimed second"]]) {
        const end = Date.now() + 15_000;
        while ((await outcomes(host, id)).length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
        expect(new Set((await outcomes(host, id)).map((r) => r.event_type))).toEqual(new Set(["steering.dropped"]));
        expect((await waitForRunOn(host, await decidedAnew(host, id), 15_000)).message?.content).toBe(`done: ${text}`);
        expect(started.filter((s) => s.text === text)).toHaveLength(1);
      }
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
