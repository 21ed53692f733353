import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * README, Production: migration 0005 renames a run not started from `queued` to `created`, and is applied after the
 * deploy; until then the previous Worker still writes `queued`, and "the new Worker treats both names as not
 * started". Its run reads must too: PROTOCOL §11 has no `queued` status, and `?status=created` must list such a run.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "legacy-queued" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "legacy-queued", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a run the previous Worker recorded as queued", () => {
  it("reads as created (its view and its ledger's run_status), and is listed by status=created", async () => {
    const first = await host.postEvent(messageEvent("legacy-queued", "first"));
    await host.waitForRun(first.body.run_id!);
    // A run not started, as the Worker before migration 0005 writes it (every column copied, the outcome left out).
    const legacy = first.body.run_id!.replace(/_[^_]+$/, "_legacyqueued01");
    const outcome = new Set(["run_id", "status", "finish_reason", "final_message_json", "error_code", "error_message", "result_count", "started_at", "ended_at"]);
    const copied = (await host.query<{ name: string }>("SELECT name FROM pragma_table_info('run')")).map((c) => c.name).filter((c) => !outcome.has(c));
    await host.query(`INSERT INTO run (run_id, status, ${copied.join(", ")}) SELECT ?, 'queued', ${copied.join(", ")} FROM run WHERE run_id = ?`, [legacy, first.body.run_id!]);

    const one = await host.admin("GET", `/v1/runs/${legacy}`);
    expect(one.status).toBe(200);
    expect(one.body.status).toBe("created");

    // Followed through its ledger, it is not started yet either.
    expect((await host.admin("GET", `/v1/runs/${legacy}/events`)).body).toMatchObject({ items: [], run_status: "created" });

    const notStarted = await host.admin("GET", "/v1/runs?conversation_id=legacy-queued&status=created");
    expect(notStarted.body.items.map((r: { run_id: string; status: string }) => [r.run_id, r.status])).toEqual([[legacy, "created"]]);
    const listed = await host.admin("GET", "/v1/runs?conversation_id=legacy-queued");
    expect(listed.body.items.map((r: { status: string }) => r.status).sort()).toEqual(["completed", "created"]);
  });
});
