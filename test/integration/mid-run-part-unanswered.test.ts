/**
 * A batch of more than 2,048 ledger rows written mid-run in parts (ledger-writes.ts) whose leading part gets no answer
 * (DB_QUERY_TIMEOUT_MS): the write of the rest, which holds the batch's message, its artifact rows and its transcript
 * items, is never made. An inline artifact of that batch was stored in R2 but has no row; the run's end must not name
 * it (its transcript item of trailing artifacts would point at an artifact no one can read), and its blob, named by
 * nothing, goes. Nor is the batch's message, recorded nowhere, the run's message. The leading part may have been
 * applied all the same: its rows are then in the ledger, and its followers get them as a replay does.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

const TELEMETRY = 2_100;
/** Named only by the burst's first line: the leading part's write alone carries it. */
const LEAD = "probe-lead-mid-run-unanswered";
const CONVERSATION = "mid-run-part-unanswered";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** Each run writes once this resolves: its test follows it first. */
let followed: Promise<void> = Promise.resolve();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "mid-run-part-unanswered",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      const line = (type: string, data: unknown) => JSON.stringify({ run_id: runId, type, data }) + "\n";
      const telemetry = (i: number) => line("tool.call.started", { tool_call_id: `c${i}`, tool_name: i === 0 ? LEAD : "t", parameters: {} });
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      await followed;
      // A first write at once; the burst with the message and artifact behind it, read meanwhile, is the next batch, written mid-run.
      res.write(line("message.delta", { chunk: { role: "assistant", content: "working" } }));
      await new Promise((r) => setTimeout(r, 50));
      const burst = Array.from({ length: TELEMETRY }, (_, i) => telemetry(i)).join("");
      const message = line("message.completed", { message: { role: "assistant", content: "never recorded" } });
      const artifact = line("artifact.created", { artifact_type: "file", name: "made.txt", mime_type: "text/plain", content_base64: Buffer.from("made mid-run").toString("base64") });
      res.write(burst + message + artifact + telemetry(TELEMETRY));
      // The run fails once that write goes unanswered; nothing more is read.
      await new Promise((r) => setTimeout(r, 3_000));
      res.end(line("run.completed", { finish_reason: "stop" }));
    },
  });
  // The burst must be read into one batch behind the first write: held for the interval (counted from that write's
  // start), all of it arrives well within 2 s even on a starved machine (at 250 ms a loaded one split it, and its
  // rows then went in a plain write, whose unanswered rows do not end the run).
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000", RUN_WRITE_INTERVAL_MS: "2000" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: CONVERSATION });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

/** A run through the burst, followed from before its first write: the run, what its follower got, and its ledger. */
async function burstRun() {
  let follow!: () => void;
  followed = new Promise((r) => (follow = r));
  const posted = await host.postEvent(messageEvent(CONVERSATION, "go"));
  const runId = posted.body.run_id!;
  // Its headers come once it follows: the live frames it is published are those it gets.
  const stream = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
  const frames = readSse(stream);
  follow();
  const run = await host.waitForRun(runId, 20_000);
  const ledger = await host.query<{ seq: number; type: string; data_json: string }>("SELECT seq, type, data_json FROM run_event WHERE run_id = ? ORDER BY seq", [runId]);
  return { run, live: await frames, ledger };
}

/** What the run left: every transcript item names a stored artifact, and every blob has its row. */
async function nothingDangling(runId: string) {
  const stored = new Set((await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId])).map((a) => a.artifact_id));
  const items = await host.query<{ content: string | null; artifact_refs_json: string | null }>("SELECT content, artifact_refs_json FROM transcript WHERE run_id = ?", [runId]);
  const named = items.flatMap((i) => JSON.parse(i.artifact_refs_json ?? "[]") as { artifact_id: string }[]).map((r) => r.artifact_id);
  expect(named.filter((id) => !stored.has(id))).toEqual([]);
  expect(items.map((i) => i.content)).not.toContain("never recorded");
  const blobs = (await host.r2Keys("artifacts/")).map((k) => k.slice("artifacts/".length));
  const rows = new Set((await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact")).map((a) => a.artifact_id));
  expect(blobs.filter((id) => !rows.has(id))).toEqual([]);
}

describe("a mid-run batch whose leading part goes unanswered", () => {
  it("leaves no transcript item naming the artifact whose row was never written, nor its blob, nor its message as the run's", async () => {
    // The leading part's write waits past the query timeout, then is refused: unanswered, and not applied.
    host.databaseOutage({ delayMs: 4_000, matching: LEAD, queries: 1 });
    host.databaseOutage({ queries: 1, matching: LEAD });
    const { run, live, ledger } = await burstRun();
    expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
    expect(run.message).toBeUndefined();
    expect(ledger.some((e) => e.data_json.includes(LEAD))).toBe(false);
    expect(live.frames.map((f) => f.seq)).toEqual(ledger.map((e) => e.seq));
    await nothingDangling(run.run_id);
  }, 30_000);

  it("applied all the same: its rows go to followers as the ledger has them, and nothing of the rest is named", async () => {
    // The leading part is applied, its answer held past the query timeout (by 3 s: a starved Worker must not see the
    // answer before its timer).
    host.databaseOutage({ answerDelayMs: 4_000, matching: LEAD, queries: 1 });
    const { run, live, ledger } = await burstRun();
    expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
    expect(run.message).toBeUndefined();
    // The leading part's 2,048 rows (the first write's delta before them), none of the rest's, then the run's end.
    expect(ledger.filter((e) => e.data_json.includes(LEAD))).toHaveLength(1);
    expect(ledger.map((e) => e.type).filter((t) => t !== "tool.call.started")).toEqual(["message.delta", "run.failed"]);
    expect(ledger).toHaveLength(2_050);
    expect(live.frames.map((f) => f.seq)).toEqual(ledger.map((e) => e.seq));
    await nothingDangling(run.run_id);
  }, 30_000);
});
