/**
 * README (Artifacts): refs announced after the run's last message get an assistant item of their own
 * (`item_type: "artifacts"`), "also when the run is cut short or lost with its instance". A run whose final write
 * the database keeps refusing is ended by the host (`host.internal_error`, endRunAfterHostFailure): the artifact it
 * announced after its message, recorded in its ledger before the refusal, must still get its item, as it does for a
 * run ended `host.session_lost` (restart-lost-artifacts.test.ts).
 *
 * README (runner failures): the host's own failures are `retryable: true` in the `run.failed` it records, whichever
 * write failed: the run's own end, or one of its writes mid-run.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const holds = new Map([["go", deferred<void>()], ["read refused", deferred<void>()], ["mid-run", deferred<void>()]]);
const MARK = "probe-final-write-refused-marker";
/** Named only by the result a run writes mid-run: that write alone carries it. */
const MID_RUN = "probe-mid-run-write-refused-marker";

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "hf-art",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      if (body.context.input.text === "mid-run") {
        // Written while the runner waits (its write interval over); the host fails the run when that write is refused.
        w.send("tool.call.started", { tool_call_id: "c1", tool_name: MID_RUN, parameters: {} });
        await holds.get("mid-run")!.promise;
        return void res.end();
      }
      w.send("message.completed", { message: { role: "assistant", content: "here is your report" } });
      w.send("artifact.created", { artifact_type: "file", name: "report.txt", mime_type: "text/plain", content_base64: Buffer.from("report").toString("base64") });
      await holds.get(body.context.input.text)?.promise;
      w.send("run.completed", { finish_reason: MARK });
      res.end();
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  await putAgent(host, { agent_id: "hf-art", runner_id: runner.runnerId() });
});
afterAll(async () => {
  for (const h of holds.values()) h.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a run the host ends host.internal_error after it made an artifact", () => {
  it("keeps the artifact announced after its last message in the transcript", async () => {
    const runId = (await host.postEvent(messageEvent("hf-art", "go"))).body.run_id!;
    await expect
      .poll(async () => (await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'artifact.created'", [runId])).length, { timeout: 5000 })
      .toBe(1);
    // Every try of the final write (one, and three more after pauses) refused: the host ends the run itself.
    host.databaseOutage({ queries: 4, matching: MARK });
    holds.get("go")!.resolve();
    const run = await host.waitForRun(runId, 20_000);
    expect({ status: run.status, code: run.error?.code }).toEqual({ status: "failed", code: "host.internal_error" });
    const [art] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);
    expect(art).toBeDefined();
    const items = await host.query<{ item_type: string; artifact_refs_json: string }>(
      "SELECT item_type, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq",
      [runId],
    );
    expect(items.map((i) => [i.item_type, JSON.parse(i.artifact_refs_json ?? "[]").map((r: { artifact_id: string }) => r.artifact_id)])).toEqual([
      ["message", []],
      ["artifacts", [art.artifact_id]],
    ]);
  }, 30_000);

  it("still ends the run when the ledger read for that item is refused", async () => {
    const runId = (await host.postEvent(messageEvent("hf-art-read", "read refused"))).body.run_id!;
    await expect
      .poll(async () => (await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'artifact.created'", [runId])).length, { timeout: 5000 })
      .toBe(1);
    // The final write (its item of artifacts names the column) is refused four times, then the read of the ledger for the item.
    host.databaseOutage({ queries: 5, matching: "artifact_refs_json" });
    holds.get("read refused")!.resolve();
    const run = await host.waitForRun(runId, 20_000);
    expect({ status: run.status, code: run.error?.code }).toEqual({ status: "failed", code: "host.internal_error" });
    const entries = (await host.admin("GET", `/v1/runs/${runId}/events`)).body.items as { type: string; data: { retryable?: boolean } }[];
    const ledger = entries.map((e) => e.type);
    expect(ledger.at(-1)).toBe("run.failed");
    // The host's own failure, not the event's: sent again, it may well run.
    expect(entries.at(-1)?.data.retryable).toBe(true);
  }, 30_000);

  it("says retryable when a write the run made mid-run is refused (the host failed while running)", async () => {
    // The mid-run write, on its first try and its three retries; the run's end that follows is written.
    host.databaseOutage({ queries: 4, matching: MID_RUN });
    const runId = (await host.postEvent(messageEvent("hf-mid-run", "mid-run"))).body.run_id!;
    const run = await host.waitForRun(runId, 20_000);
    expect({ status: run.status, code: run.error?.code, message: run.error?.message }).toEqual({ status: "failed", code: "host.internal_error", message: "the host failed while running" });
    const ended = ((await host.admin("GET", `/v1/runs/${runId}/events`)).body.items as { type: string; origin: string; data: { retryable?: boolean } }[]).filter((e) => e.type === "run.failed");
    expect(ended.map((e) => [e.origin, e.data.retryable])).toEqual([["host", true]]);
  }, 30_000);
});
