/**
 * R2 that hangs (README "R2 that does not answer"): every call of the ARTIFACTS bucket is bounded by
 * BLOB_OP_TIMEOUT_MS, so a call R2 never answers fails that one thing, after the bound, and nothing else: a run's end
 * does not hold the conversation's next run, an event whose attachment R2 does not take is refused (503, recorded
 * nowhere) and can be sent again, a runner's read or upload is a retryable error, an inline artifact is dropped with
 * a warning while its run goes on, and a retention sweep fails its step and runs again next time (the sweep of runs
 * never handed over, whose place R2 keeps, runs from the start without it). The drill holds the
 * Worker's R2 call unanswered, for good or past the bound (local/storage-drill.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred, stalledBody, uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { runLedger } from "../support/scripted-runner";
import { resultWriter, startAdHocRunner } from "../support/runner";

const BOUND_MS = 1_000;
/** Named only by a line of the batch whose write never gets an answer: the database drill holds that write alone. */
const UNDECIDED = "probe-storage-hang-undecided";
/** Holds a database write for good (the drill's request is dropped with the host). */
const never = deferred<void>();
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "storage-hangs",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const text: string = ctx.input.text;
      const api = (action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      if (text === "undecided") {
        const line = (type: string, data: unknown) => JSON.stringify({ run_id: ctx.run_id, type, data }) + "\n";
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        // A first write at once; the rest, read meanwhile, is the next batch, written mid-run (RUN_WRITE_INTERVAL_MS later).
        res.write(line("message.delta", { chunk: { role: "assistant", content: "working" } }));
        await new Promise((r) => setTimeout(r, 50));
        const artifact = line("artifact.created", { artifact_type: "file", name: "made.txt", mime_type: "text/plain", content_base64: Buffer.from("made mid-run").toString("base64") });
        res.write(line("tool.call.started", { tool_call_id: "c1", tool_name: UNDECIDED, parameters: {} }) + artifact + line("message.completed", { message: { role: "assistant", content: "made it" } }));
        // The run fails once that write goes unanswered; nothing more is read.
        await new Promise((r) => setTimeout(r, 3_000));
        return void res.end(line("run.completed", { finish_reason: "stop" }));
      }
      const w = resultWriter(res, ctx.run_id);
      const outcome = (r: { status: number; body: { error?: { code: string; retryable?: boolean } } }) => [r.status, r.body.error?.code ?? null, r.body.error?.retryable ?? null];
      if (text === "read twice") {
        const id = ctx.input.attachments[0].artifact_id;
        const first = await api("artifact.read", { artifact_id: id });
        const again = await api("artifact.read", { artifact_id: id });
        return w.reply(JSON.stringify([outcome(first), outcome(again), Buffer.from(again.body.data?.content_base64 ?? "", "base64").toString()]));
      }
      if (text === "upload twice") {
        const upload = () => uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, Buffer.from("upload bytes"), { name: "u.txt", mime_type: "text/plain" });
        const started = Date.now();
        const first = await upload();
        const tookMs = Date.now() - started;
        return w.reply(JSON.stringify({ first: outcome(first), tookMs, again: (await upload()).status }));
      }
      if (text === "slow upload") {
        // A sized body still being sent when R2's bound passes: part of it, a pause past the bound, then the rest.
        const url = `${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=slow.bin`;
        return w.reply(JSON.stringify(await stalledBody(url, { method: "PUT", token: ctx.runtime.api.token, declared: 1024 * 1024, first: 64 * 1024, pauseMs: BOUND_MS + 500 })));
      }
      if (text === "inline") {
        w.send("artifact.created", { artifact_type: "file", name: "kept-out.txt", mime_type: "text/plain", content_base64: Buffer.from("inline bytes").toString("base64") });
        return w.reply("done anyway");
      }
      if (text === "read") return w.reply(JSON.stringify(outcome(await api("artifact.read", { artifact_id: ctx.input.attachments[0].artifact_id }))));
      w.reply(`heard: ${text}`);
    },
  });
  // The undecided batch is read whole behind the first write (held for the interval from that write's start).
  host = await startTestHost({ vars: { BLOB_OP_TIMEOUT_MS: String(BOUND_MS), DB_QUERY_TIMEOUT_MS: "1000", RUN_WRITE_INTERVAL_MS: "2000" }, storageDrill: true });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "storage-hangs" });
});
// A hang armed for calls a test did not make is never left to hold the next test's.
afterEach(() => host?.storageHang(false));
afterAll(async () => {
  host?.storageHang(false);
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

const reply = async (runId: string) => JSON.parse(String((await host.waitForRun(runId, 20_000)).message?.content));
const attachment = (text: string) => ({ content_base64: Buffer.from(text).toString("base64"), name: "f.txt", mime_type: "text/plain" });

describe("a run's end whose blob delete R2 never answers", () => {
  it("ends within the bound, and the conversation's next run, queued behind it, runs", async () => {
    const held = deferred<void>();
    // The batch's write is held unanswered for good: its blob may be named, until the run's end says it is not; then
    // its delete, which R2 never answers.
    host.databaseOutage({ holdUntil: never.promise, matching: UNDECIDED });
    host.storageHang({ op: "delete", key: "artifacts/", onHeld: held.resolve });
    const first = await host.postEvent(messageEvent("hang-end", "undecided"));
    const next = await host.postEvent(messageEvent("hang-end", "after it"));
    expect([first.body.disposition, next.body.disposition]).toEqual(["started", "queued"]);
    const ended = await host.waitForRun(first.body.run_id!, 20_000);
    expect([ended.status, ended.error?.code]).toEqual(["failed", "host.internal_error"]);
    await held.promise;
    const after = await host.waitForRun(next.body.run_id!, 20_000);
    host.databaseOutage(false);
    expect([after.status, after.message?.content]).toEqual(["completed", "heard: after it"]);
  }, 30_000);
});

describe("an event whose attachment R2 never takes", () => {
  it("is refused within the bound, 503 storage_unavailable, recorded nowhere; sent again, it runs", async () => {
    const event = messageEvent("hang-ingress", "read", { event_id: "evt-hang-ingress", input: { text: "read", attachments: [attachment("first file"), attachment("second file")] } });
    // The second file's put: the first file is stored, then removed (best effort) as the event is refused.
    const held = deferred<void>();
    host.storageHang({ op: "put", key: "artifacts/", skip: 1, onHeld: held.resolve });
    const started = Date.now();
    const refused = await host.postEvent(event);
    const tookMs = Date.now() - started;
    await held.promise;
    expect([refused.status, refused.body.error?.code]).toEqual([503, "storage_unavailable"]);
    expect(refused.body.error?.message).toMatch(/storage did not answer in time \(an R2 put within 1000 ms\)/);
    expect(tookMs).toBeGreaterThanOrEqual(BOUND_MS);
    expect(tookMs).toBeLessThan(BOUND_MS + 2_000);
    // Nothing of it: no record, no run, no artifact row.
    expect(await host.query("SELECT 1 FROM event_log WHERE event_id = 'evt-hang-ingress'")).toEqual([]);
    expect(await host.query("SELECT 1 FROM run WHERE conversation_id = 'hang-ingress'")).toEqual([]);
    expect(await host.query("SELECT 1 FROM artifact WHERE conversation_id = 'hang-ingress'")).toEqual([]);
    const again = await host.postEvent(event);
    expect([again.status, again.body.disposition]).toEqual([202, "started"]);
    expect(await reply(again.body.run_id!)).toEqual([200, null, null]);
  });
});

describe("a runner's call whose R2 call never answers", () => {
  it("artifact.read: a retryable 500 after the bound; read again, the bytes", async () => {
    host.storageHang({ op: "get", key: "artifacts/" });
    const posted = await host.postEvent(messageEvent("hang-read", "read twice", { input: { text: "read twice", attachments: [attachment("the bytes")] } }));
    expect(await reply(posted.body.run_id!)).toEqual([[500, "runtime_error", true], [200, null, null], "the bytes"]);
  });

  it("artifact.upload: a retryable 500 once R2 has taken nothing for the bound; uploaded again, stored", async () => {
    host.storageHang({ op: "put", key: "artifacts/" });
    const posted = await host.postEvent(messageEvent("hang-upload", "upload twice"));
    const answer = await reply(posted.body.run_id!);
    expect(answer).toEqual({ first: [500, "runtime_error", true], tookMs: expect.any(Number), again: 200 });
    expect(answer.tookMs).toBeLessThan(BOUND_MS + 2_000);
    expect(await host.query("SELECT name FROM artifact WHERE run_id = ?", [posted.body.run_id!])).toEqual([{ name: "u.txt" }]);
  });

  it("artifact.upload whose client is still sending past the bound: the rest is read first, so the client reads the 500, not a reset", async () => {
    host.storageHang({ op: "put", key: "artifacts/" });
    const posted = await host.postEvent(messageEvent("hang-upload-slow", "slow upload"));
    expect(await reply(posted.body.run_id!)).toEqual({ answeredDuringPause: false, status: 500 });
  });
});

describe("an inline artifact whose put R2 never answers", () => {
  it("is dropped after one try, its warning saying so; the run completes", async () => {
    host.storageHang({ op: "put", key: "artifacts/" });
    const posted = await host.postEvent(messageEvent("hang-inline", "inline"));
    const run = await host.waitForRun(posted.body.run_id!, 20_000);
    expect([run.status, run.message?.content]).toEqual(["completed", "done anyway"]);
    const ledger = (await runLedger(host, run.run_id)) as { type: string; data: { code?: string; message?: string } }[];
    const warnings = ledger.filter((e) => e.type === "host.warning").map((e) => [e.data.code, e.data.message]);
    expect(warnings).toEqual([["result.artifact_unstored", expect.stringMatching(/R2 did not answer a put of artifacts\/\S+ within 1000 ms\)$/)]]);
    expect(await host.query("SELECT 1 FROM artifact WHERE run_id = ?", [run.run_id])).toEqual([]);
  });
});

describe("a retention sweep whose R2 listing answers only long past the bound", () => {
  it("fails that step within the bound; the next invocation runs it", async () => {
    host.storageHang({ op: "list", afterMs: BOUND_MS * 4 });
    const started = Date.now();
    await expect(host.triggerScheduled()).rejects.toMatchObject({ outcome: "exception" });
    expect(Date.now() - started).toBeLessThan(BOUND_MS * 4);
    await host.triggerScheduled();
  });
});

describe("the never-handed-over sweep whose place R2 never gives", () => {
  it("walks from the start without it: a run never handed over is ended", async () => {
    const lost = await unhandedRun(host, "hang-sweep-place", "evt-hang-sweep-place");
    const held = deferred<void>();
    host.storageHang({ op: "get", key: "host/unhanded-sweep", onHeld: held.resolve });
    // Past the hand-over grace (10 minutes). The invocation's outcome is not this test's: other steps may fail.
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * 60_000) }).catch(() => undefined);
    await held.promise;
    const run = (await host.admin("GET", `/v1/runs/${lost}`)).body;
    expect([run.status, run.error?.code]).toEqual(["failed", "host.not_handed_over"]);
  });
});
