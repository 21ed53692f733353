import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * The result past RUN_MAX_MESSAGES or RUN_MAX_STATE_UPDATES fails its run and stays in its ledger as sent, not applied:
 * dropped, so like every dropped result (README, Writing a runner) a `host.warning` names it by `ledger_seq` (code
 * `result.over_limit`) and a `runner.result_dropped` record audits it. Without the warning, a replay of the ledger
 * and the host's own end of the run (recorded-end.ts) took it for a result the host applied.
 */
const CAP = 2;

/** What the cases read of a ledger entry's data. */
type Data = { message?: { content?: unknown }; finish_reason?: unknown; key?: unknown; code?: unknown; ledger_seq?: unknown };

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "over-cap-named",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const mode = String(ctx.input.text);
      if (mode === "state") {
        w.send("message.completed", { message: { role: "assistant", content: "saving" } });
        for (let i = 1; i <= CAP + 2; i++) w.send("state.updated", { scope: "conversation", key: `k${i}`, value: i });
        return w.reply("saved");
      }
      for (let i = 1; i <= CAP; i++) w.send("message.completed", { message: { role: "assistant", content: `m${i}` } });
      // The message past the cap: a message.completed of its own, or the one run.completed brings.
      if (mode === "completion") w.send("run.completed", { finish_reason: "stop", message: { role: "assistant", content: "final" } });
      else w.reply("past the cap");
      res.end();
    },
  });
  host = await startTestHost({ vars: { RUN_MAX_MESSAGES: String(CAP), RUN_MAX_STATE_UPDATES: String(CAP) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "over-cap-named" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function ledgerAndAudits(conv: string, text: string) {
  const posted = await host.postEvent(messageEvent(conv, text));
  const run = await host.waitForRun(posted.body.run_id!);
  const rows = await host.query<{ seq: number; type: string; origin: string; data_json: string }>("SELECT seq, type, origin, data_json FROM run_event WHERE run_id = ? ORDER BY seq", [run.run_id]);
  const ledger = rows.map((r) => ({ seq: r.seq, type: r.type, origin: r.origin, data: JSON.parse(r.data_json) as Data }));
  const audits = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ? ORDER BY seq", [run.run_id]);
  return { run, ledger, audits: audits.map((a) => JSON.parse(a.data_json)) };
}

describe("the result past a run's cap", () => {
  it.each([
    ["message.completed", "message", "runner.too_many_messages", (d: Data) => d.message?.content === "past the cap"],
    ["run.completed", "completion", "runner.too_many_messages", (d: Data) => d.finish_reason === "stop"],
    ["state.updated", "state", "runner.too_many_state_updates", (d: Data) => d.key === `k${CAP + 1}`],
  ])("a %s is named dropped by a warning and an audit record", async (type, mode, code, isOverCap) => {
    const { run, ledger, audits } = await ledgerAndAudits(`over-cap-${mode}`, mode);
    expect({ status: run.status, code: run.error?.code }).toEqual({ status: "failed", code });
    const over = ledger.find((e) => e.origin === "runner" && e.type === type && isOverCap(e.data));
    expect(over).toBeDefined();
    const warnings = ledger.filter((e) => e.type === "host.warning" && e.data.ledger_seq === over!.seq);
    expect(warnings).toEqual([expect.objectContaining({ origin: "host", data: expect.objectContaining({ code: "result.over_limit", ledger_seq: over!.seq, sequence: expect.any(Number) }) })]);
    // Before the run's end, which stays the ledger's last entry.
    expect(ledger.at(-2)).toBe(warnings[0]);
    expect(ledger.at(-1)).toMatchObject({ type: "run.failed", origin: "host", data: { code } });
    expect(audits).toEqual([expect.objectContaining({ run_id: run.run_id, result_type: type, ledger_seq: over!.seq, limit: CAP })]);
  });
});
