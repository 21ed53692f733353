import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { deniedCalls, putAgent, runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * PROTOCOL §12: denials are audited in EventLog; a record stays small whatever a runner asked for (each field cut to
 * 200 characters), and a run records only its first 100 (README "Effective access"), however many it is refused.
 */

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "denials", runners: [{ name: "default", label: { en_US: "d" }, capabilities: {}, permissions: { history: ["page"] } }] });
  host = await startTestHost({ captureLogs: true });
  await runner.register(host);
  await putAgent(host, { agent_id: "denials", runner_id: runner.runnerId(), scope: { type: "global" } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("denial records stay small whatever was asked", () => {
  it("a history.page naming a huge conversation_id leaves an EventLog denial cut as the decision log cuts it (≤ 200 characters)", async () => {
    const huge = "c".repeat(1024 * 1024);
    const { result, runId } = await runner.run(host, "huge-id", async (api) => (await api("history.page", { conversation_id: huge })).status);
    expect(result).toBe(403);
    const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'host_api.denied' AND run_id = ?", [runId]);
    expect(rows).toHaveLength(1);
    const denial = JSON.parse(rows[0].data_json);
    expect(denial.action).toBe("history.page");
    expect(denial.resource.conversation_id).toBe("c".repeat(200));
    expect(rows[0].data_json.length).toBeLessThan(4096);
  });
});

describe("a run's denials cost a bounded number of records", () => {
  it("records a run's first 100 denials, then one record of how many more there were; every call answered and logged as before", async () => {
    const calls = 130;
    const { result, runId } = await runner.run(host, "many-denials", async (api) => {
      const answers: string[] = [];
      // Ten at a time: many in flight, under the run's MAX_API_CALLS_IN_FLIGHT.
      for (let i = 0; i < calls; i += 10) answers.push(...(await Promise.all(Array.from({ length: 10 }, async () => JSON.stringify(await api("event.page", {}))))));
      return { answered: answers.length, distinct: [...new Set(answers)].map((a) => JSON.parse(a)) };
    });
    expect(result.answered).toBe(calls);
    expect(result.distinct).toEqual([{ status: 403, body: { ok: false, error: expect.objectContaining({ code: "unauthorized" }) } }]);
    const reason = result.distinct[0].body.error.message;

    // The count is written once the run is over: wait for it (or for what is there instead).
    let records = await deniedCalls(host, runId);
    for (let until = Date.now() + 5000; Date.now() < until && !records.some((r) => r.action === null); ) {
      await new Promise((r) => setTimeout(r, 50));
      records = await deniedCalls(host, runId);
    }
    const scope = { conversation_id: "many-denials", thread_id: null };
    const full = { run_id: runId, runner_id: runner.runnerId(), action: "event.page", resource: { action: "event.page", api: "event_page" }, scope, reason };
    expect(records).toHaveLength(101);
    expect(records.slice(0, 100)).toEqual(Array(100).fill(full));
    expect(records[100]).toEqual({
      run_id: runId,
      runner_id: runner.runnerId(),
      action: null,
      resource: {},
      scope,
      reason: "30 more denials of this run were not recorded: only the first 100 of a run are",
      suppressed: 30,
    });
    const ledger = await runLedger(host, runId);
    expect(ledger.filter((e) => e.type === "host_api.denied").map((e) => e.data)).toEqual(Array(100).fill(full));
    // Every decision is still one log line.
    expect(host.decisions(runId).filter((d) => d.action === "event.page" && d.outcome === "unauthorized" && d.status === 403)).toHaveLength(calls);
  });

  it("still writes the count when the database refuses its first write, as a run's own writes are tried again", async () => {
    // The count's write (its reason names it) refused once, a moment's refusal.
    host.databaseOutage({ queries: 1, matching: "more denials of this run were not recorded" });
    const { runId } = await runner.run(host, "denials-refused-once", async (api) => {
      for (let i = 0; i < 110; i += 10) await Promise.all(Array.from({ length: 10 }, () => api("event.page", {})));
    });
    let counts: Awaited<ReturnType<typeof deniedCalls>> = [];
    for (let until = Date.now() + 8000; Date.now() < until && counts.length === 0; await new Promise((r) => setTimeout(r, 50))) {
      counts = (await deniedCalls(host, runId)).filter((r) => r.action === null);
    }
    expect(counts).toEqual([expect.objectContaining({ action: null, suppressed: 10 })]);
  });
});
