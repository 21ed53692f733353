import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminCall, bindRunner } from "../../local/setup";
import { ADMIN_TOKEN, messageEvent, readSse, startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useDataDir } from "../support/restart-host";

/**
 * Runs in flight when the host restarts (same data folder): each ends failed with host.session_lost, keeping what it
 * recorded before (ledger, transcript, and the run row's account of it), and the runs queued behind it still run, in
 * order, also with events arriving after the restart.
 */
const dataDir = useDataDir("agent-host-restart-runs-");
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const never = deferred();
const started: { runId: string; text: string }[] = [];

const start = (interval = "1000") =>
  startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: interval });

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "restartruns",
    async onRun({ body }, res) {
      const ctx = body.context;
      started.push({ runId: ctx.run_id, text: ctx.input.text });
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text.startsWith("interim")) {
        w.send("message.completed", { message: { role: "assistant", content: "one moment…" } });
        w.send("tool.call.started", { tool_call_id: "t1", tool_name: "search", parameters: {} });
      }
      if (ctx.input.text.startsWith("hold") || ctx.input.text.startsWith("interim")) await never.promise;
      w.reply(`done: ${ctx.input.text}`);
    },
  });
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
});


async function untilStarted(text: string) {
  const end = Date.now() + 10_000;
  while (!started.some((s) => s.text === text)) {
    if (Date.now() > end) throw new Error(`runner never called for ${text}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("runs in flight at a restart", () => {
  it("a lost run's row keeps the account of what it recorded: its result count and its message", async () => {
    let host = await start();
    try {
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "restartruns" });
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("rr-interim", "interim please"));
      await untilStarted("interim please");
      // Its first results are recorded before the restart.
      const until = Date.now() + 5_000;
      while ((await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'tool.call.started'", [held.body.run_id])).length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      await host.dispose();
      host = await start();
      const lost = await waitForRunOn(host, held.body.run_id, 15_000);
      expect(lost).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      const ledger = (await adminCall<{ items: { type: string; origin: string }[] }>(host, "GET", `/v1/runs/${held.body.run_id}/events`)).body.items;
      expect(ledger.map((e) => e.type)).toEqual(["message.completed", "tool.call.started", "run.failed"]);
      // As for any other failed run (a stream cut short after a message): the results it recorded, and its message.
      expect(lost.result_count).toBe(ledger.filter((e) => e.origin === "runner").length);
      expect(lost.message).toEqual({ role: "assistant", content: "one moment…" });
    } finally {
      await host.dispose();
    }
  });

  it("the runs queued behind a lost run run after the restart, in order, before events that arrive after it", async () => {
    let host = await start("60000");
    try {
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "restartruns" });
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("rr-queue", "hold q"));
      await untilStarted("hold q");
      const b = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("rr-queue", "second"));
      const c = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("rr-queue", "third"));
      expect([b.body.disposition, c.body.disposition]).toEqual(["queued", "queued"]);
      await host.dispose();
      host = await start("60000");
      // A follower of the lost run, reconnecting after the restart, hears how it ended.
      const stream = fetch(`${host.url}/v1/runs/${held.body.run_id}/stream`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      const d = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("rr-queue", "fourth"));
      expect(d.body.disposition).toBe("queued");
      expect(await waitForRunOn(host, held.body.run_id, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      for (const r of [b, c, d]) expect(await waitForRunOn(host, r.body.run_id, 15_000)).toMatchObject({ status: "completed" });
      expect(started.filter((s) => [b, c, d].some((r) => r.body.run_id === s.runId)).map((s) => s.text)).toEqual(["second", "third", "fourth"]);
      const sse = await readSse(await stream);
      expect(sse.end).toBe("failed");
      expect(sse.frames.at(-1)).toMatchObject({ type: "run.failed", data: { code: "host.session_lost" } });
    } finally {
      await host.dispose();
    }
  });
});
