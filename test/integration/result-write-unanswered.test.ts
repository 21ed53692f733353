/**
 * README (runner results): only a run's first 100 drops get a `runner.result_dropped` audit record each; the run's end
 * counts the others (`suppressed`), those whose audit was in a write the database never applied included. Every drop
 * is recorded exactly once, by its own audit or by that count, also when a write holding audits gets no answer
 * (DB_QUERY_TIMEOUT_MS): it may have been applied, or not, or be applied only after the run's end, which it must not
 * change (README, Database: a run's write that lands after its end writes nothing). The run's other records agree
 * with what was written all the same: its result_count with its ledger, its message and its items with its transcript.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type RunView, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

const DROPS = 30;
const TELEMETRY = 2_100;
/** Named only by the burst's first line: the leading part's write alone carries it (a batch of more than 2,048 rows). */
const LEAD = "probe-drop-count-lead";
/** Named only by the keys of the drops of a batch not split in parts: its write alone carries them. */
const WHOLE = "probe-drop-count-whole";
/** That batch's message. */
const REST = "probe-drop-count-rest";
/** Named only by the file a run sends with its end: the end's own write alone carries it. */
const END_FILE = "probe-end-file.txt";
/** Holds a write for good (the drill's request is dropped with the host). */
const never = deferred<void>();
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "drop-count-unanswered",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      const split = body.context.input.text !== "whole";
      const line = (type: string, data: unknown) => JSON.stringify({ run_id: runId, type, data }) + "\n";
      const file = (name: string) => line("artifact.created", { artifact_type: "file", name, mime_type: "text/plain", content_base64: Buffer.from(`content of ${name}`).toString("base64") });
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      // A first write at once; what follows, read meanwhile, is the next batch, written mid-run.
      res.write(line("message.delta", { chunk: { role: "assistant", content: "working" } }));
      await new Promise((r) => setTimeout(r, 50));
      // A file sent with the run's end: held with it (the write interval is not over), so written with the end.
      if (body.context.input.text === "end-file") return void res.end(file(END_FILE) + line("run.completed", { finish_reason: "stop" }));
      // A scope no run has: each one is dropped as an invalid strict payload, and audited (the run's first drops).
      const drops = Array.from({ length: DROPS }, (_, i) => line("state.updated", { scope: "galaxy", key: `${split ? "k" : WHOLE}${i}`, value: i })).join("");
      const telemetry = (i: number) => line("tool.call.started", { tool_call_id: `c${i}`, tool_name: i === 0 ? LEAD : "t", parameters: {} });
      if (split) res.write(telemetry(0) + drops + Array.from({ length: TELEMETRY }, (_, i) => telemetry(i + 1)).join("") + line("message.completed", { message: { role: "assistant", content: "done" } }));
      else {
        // A file after the message: no message carries it, so the run's end owes it an item of its own.
        res.write(drops + line("message.completed", { message: { role: "assistant", content: REST } }) + file("after.txt"));
      }
      // The run fails once that write goes unanswered; nothing more is read.
      await new Promise((r) => setTimeout(r, 3_000));
      res.end(line("run.completed", { finish_reason: "stop" }));
    },
  });
  // The burst is read into one batch behind the first write (held for the interval, counted from that write's start).
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000", RUN_WRITE_INTERVAL_MS: "2000" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "drop-count-unanswered" });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

async function failedRun(text: string): Promise<RunView> {
  const runId = (await host.postEvent(messageEvent(`drop-count-unanswered-${text}`, text))).body.run_id!;
  const run = await host.waitForRun(runId, 20_000);
  expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
  return run;
}

/** The run's write held on the wire past the query timeout, then let go once the run has ended: applied after its end. */
async function landingAfterTheEnd(text: string, matching: string): Promise<RunView> {
  const release = deferred<void>();
  const held = deferred<void>();
  const served = deferred<void>();
  host.databaseOutage({ holdUntil: release.promise, matching, onHeld: held.resolve, onServed: served.resolve });
  const run = await failedRun(text);
  await held.promise;
  release.resolve();
  // What it would add is there once the database has run it (not after a guess at how long that takes).
  await served.promise;
  return run;
}

/** How the EventLog records the run's drops: audits of their own (the ledger_seq each names), and the count of the others. */
async function dropRecords(runId: string) {
  const audits = (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [runId])).map((r) => JSON.parse(r.data_json));
  const own = audits.filter((a) => a.ledger_seq !== null).map((a) => a.ledger_seq as number);
  const counted = audits.filter((a) => a.ledger_seq === null).reduce((n, a) => n + a.suppressed, 0);
  return { own, counted, reasons: audits.filter((a) => a.ledger_seq === null).map((a) => a.reason as string) };
}

/** The blobs stored in R2 since `before` (a listing of the artifacts' keys). */
const newBlobs = async (before: Set<string>) => (await host.r2Keys("artifacts/")).filter((k) => !before.has(k));

const ledgerWarnings = async (runId: string) => (await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'host.warning'", [runId])).length;

/** The run's end counted its results as its ledger holds them: nothing landed after it. */
async function countAgrees(runId: string) {
  const [row] = await host.query<{ result_count: number }>("SELECT result_count FROM run WHERE run_id = ?", [runId]);
  const recorded = await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND origin = 'runner'", [runId]);
  expect(recorded.length).toBe(row.result_count);
}

/** The run's transcript: its messages, and the artifacts its items name that have no row. */
async function transcriptOf(runId: string) {
  const items = await host.query<{ item_type: string; content: string | null; artifact_refs_json: string | null }>("SELECT item_type, content, artifact_refs_json FROM transcript WHERE run_id = ? ORDER BY seq", [runId]);
  const stored = new Set((await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId])).map((a) => a.artifact_id));
  const named = items.flatMap((i) => JSON.parse(i.artifact_refs_json ?? "[]") as { artifact_id: string }[]).map((r) => r.artifact_id);
  return { messages: items.filter((i) => i.item_type === "message").map((i) => i.content), files: named.length, dangling: named.filter((id) => !stored.has(id)) };
}

describe("the drops of a run's write that got no answer", () => {
  it("are counted when it was a leading part never applied", async () => {
    // The leading part's write is held past the query timeout, and for good: unanswered, and never applied.
    host.databaseOutage({ holdUntil: never.promise, matching: LEAD });
    const { run_id: runId } = await failedRun("split");
    expect(await ledgerWarnings(runId)).toBe(0);
    const { own, counted, reasons } = await dropRecords(runId);
    expect({ own: own.length, counted }).toEqual({ own: 0, counted: DROPS });
    expect(reasons).toEqual([expect.stringMatching(/the write of 30 of those was refused or never applied$/)]);
  }, 30_000);

  it("are counted when it was a whole batch never applied", async () => {
    host.databaseOutage({ holdUntil: never.promise, matching: WHOLE });
    const run = await failedRun("whole");
    expect(await ledgerWarnings(run.run_id)).toBe(0);
    const { own, counted } = await dropRecords(run.run_id);
    expect({ own: own.length, counted }).toEqual({ own: 0, counted: DROPS });
  }, 30_000);

  it("are audited, not counted, when it was applied before the run's end", async () => {
    // Applied at once, its answer held past the query timeout.
    host.databaseOutage({ answerDelayMs: 2_000, matching: LEAD, queries: 1 });
    const { run_id: runId } = await failedRun("split");
    expect(await ledgerWarnings(runId)).toBe(DROPS);
    const { own, counted } = await dropRecords(runId);
    expect({ own: new Set(own).size, counted }).toEqual({ own: DROPS, counted: 0 });
  }, 30_000);

  it("are audited when it was a whole batch applied before the run's end, whose message and file the run keeps", async () => {
    host.databaseOutage({ answerDelayMs: 2_000, matching: WHOLE, queries: 1 });
    const run = await failedRun("whole");
    const { own, counted } = await dropRecords(run.run_id);
    expect({ own: new Set(own).size, counted }).toEqual({ own: DROPS, counted: 0 });
    expect(run.message?.content).toBe(REST);
    expect(await transcriptOf(run.run_id)).toEqual({ messages: [REST], files: 1, dangling: [] });
    // Its row names its blob: kept.
    const [file] = await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact WHERE run_id = ?", [run.run_id]);
    expect(await host.r2Object(file.r2_key)).not.toBeNull();
  }, 30_000);

  it("are recorded once when it was a leading part landing after the run's end, which wrote nothing of it", async () => {
    const { run_id: runId } = await landingAfterTheEnd("split", LEAD);
    const { own, counted } = await dropRecords(runId);
    expect(new Set(own).size + counted).toBe(DROPS);
    expect(own.length).toBe(new Set(own).size);
    await countAgrees(runId);
  }, 30_000);

  it("are recorded once when it was a whole batch landing after the run's end, which wrote nothing of it", async () => {
    const run = await landingAfterTheEnd("whole", WHOLE);
    const { own, counted } = await dropRecords(run.run_id);
    expect(new Set(own).size + counted).toBe(DROPS);
    expect(own.length).toBe(new Set(own).size);
    await countAgrees(run.run_id);
    expect(run.message).toBeUndefined();
    expect(await transcriptOf(run.run_id)).toEqual({ messages: [], files: 0, dangling: [] });
  }, 30_000);

  it("are counted by the host's end of the run when its own end's write is refused too", async () => {
    host.databaseOutage({ holdUntil: never.promise, matching: WHOLE });
    // The run's own end ("the host failed while running"), refused on its first try and its three retries.
    host.databaseOutage({ queries: 4, matching: "the host failed while running" });
    const run = await failedRun("whole");
    expect(run.error?.message).toBe("the host failed to record the run");
    const { own, counted } = await dropRecords(run.run_id);
    expect({ own: own.length, counted }).toEqual({ own: 0, counted: DROPS });
  }, 30_000);

  it("adds no count when its own end lands after the host ended the run as lost, counting the drops its ledger holds", async () => {
    // The whole batch, then the run's own end (its failure), are held past the query timeout; the host's end of the
    // run is refused, so the run is ended as lost (the drops its ledger holds: none). Then both held writes land.
    const release = deferred<void>();
    const [batchServed, endServed] = [deferred<void>(), deferred<void>()];
    host.databaseOutage({
      holdUntil: release.promise,
      matching: WHOLE,
      onServed: batchServed.resolve,
      onHeld: () => {
        host.databaseOutage({ holdUntil: release.promise, matching: "the host failed while running", onServed: endServed.resolve });
        host.databaseOutage({ queries: 1, matching: "the host failed to record the run" });
      },
    });
    const runId = (await host.postEvent(messageEvent("drop-count-unanswered-lost", "whole"))).body.run_id!;
    const run = await host.waitForRun(runId, 20_000);
    expect([run.status, run.error?.code]).toEqual(["failed", "host.session_lost"]);
    release.resolve();
    await Promise.all([batchServed.promise, endServed.promise]);
    expect(await ledgerWarnings(runId)).toBe(0);
    const { own, counted } = await dropRecords(runId);
    expect({ own: own.length, counted }).toEqual({ own: 0, counted: 0 });
    await countAgrees(runId);
  }, 30_000);
});

describe("a run whose write got no answer", () => {
  it("has neither the message nor the file of a whole batch never applied", async () => {
    host.databaseOutage({ holdUntil: never.promise, matching: WHOLE });
    const run = await failedRun("whole");
    // Its message, recorded nowhere, is not the run's; no item names its file, which has no row.
    expect(run.message).toBeUndefined();
    expect(await transcriptOf(run.run_id)).toEqual({ messages: [], files: 0, dangling: [] });
  }, 30_000);

  it("removes the stored file of a whole batch never applied once its end is recorded (no row will ever name it)", async () => {
    const before = new Set(await host.r2Keys("artifacts/"));
    const held = deferred<void>();
    host.databaseOutage({ holdUntil: never.promise, matching: WHOLE, onHeld: held.resolve });
    const ended = failedRun("whole");
    await held.promise;
    // Stored before its row's write was sent.
    expect(await newBlobs(before)).toHaveLength(1);
    await ended;
    await expect.poll(() => newBlobs(before)).toEqual([]);
  }, 30_000);

  it("removes the stored file its own end's write held once the host's end is recorded", async () => {
    const before = new Set(await host.r2Keys("artifacts/"));
    const held = deferred<void>();
    host.databaseOutage({ holdUntil: never.promise, matching: END_FILE, onHeld: held.resolve });
    const ended = failedRun("end-file");
    await held.promise;
    expect(await newBlobs(before)).toHaveLength(1);
    const run = await ended;
    expect(run.error?.message).toBe("the host failed to record the run");
    await expect.poll(() => newBlobs(before)).toEqual([]);
  }, 30_000);

  it("keeps the stored file its own end's write held when that write was applied, its answer lost", async () => {
    // Applied at once, its answer held past the query timeout: the run ended as it said, and the host's end, finding it
    // ended, removes only blobs no row names; this one's row does.
    host.databaseOutage({ answerDelayMs: 2_000, matching: END_FILE, queries: 1 });
    const conversation = "drop-count-unanswered-end-file-applied";
    const first = (await host.postEvent(messageEvent(conversation, "end-file"))).body.run_id!;
    // Queued behind it (one run at a time in a conversation): it starts once the first run's host end is done.
    const next = (await host.postEvent(messageEvent(conversation, "end-file"))).body.run_id!;
    expect((await host.waitForRun(next, 20_000)).status).toBe("completed");
    expect((await host.waitForRun(first)).status).toBe("completed");
    const rows = await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact WHERE run_id = ?", [first]);
    expect(rows).toHaveLength(1);
    expect(await host.r2Object(rows[0].r2_key)).not.toBeNull();
  }, 30_000);

  it("keeps one record of how it ended when its own end lands after the host's", async () => {
    // The whole batch waits past the query timeout and is then refused: never applied. The run's own end that follows
    // (its failure: "the host failed while running") is held until the host has ended the run itself, then applied.
    host.databaseOutage({ delayMs: 3_000, matching: WHOLE, queries: 1 });
    host.databaseOutage({ queries: 1, matching: WHOLE });
    const release = deferred<void>();
    const held = deferred<void>();
    const served = deferred<void>();
    host.databaseOutage({ holdUntil: release.promise, matching: "the host failed while running", onHeld: held.resolve, onServed: served.resolve });
    const run = await failedRun("whole");
    expect(run.error?.message).toBe("the host failed to record the run");
    await held.promise;
    release.resolve();
    await served.promise;
    const records = await host.query("SELECT 1 FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [run.run_id]);
    const ends = await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'run.failed'", [run.run_id]);
    expect({ records: records.length, ends: ends.length }).toEqual({ records: 1, ends: 1 });
    await countAgrees(run.run_id);
  }, 30_000);
});
