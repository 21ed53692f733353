/**
 * R2 that fails at once (README "R2 that does not answer"), as it does with its internal error or a network fault: it
 * is answered as storage's trouble, as R2 not answering is, never as the host's nor the request's. An event whose
 * attachment R2 fails is refused 503 `storage_unavailable`, recorded nowhere, and runs when sent again; a runner's
 * upload or read is a retryable 500 saying storage failed; an inline artifact is tried again, then dropped with a
 * warning saying R2 failed it, while its run completes. The drill fails the Worker's R2 calls of a kind
 * (local/storage-drill.ts `storageFailure`).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred, inChunks, largeFile, stalledBody, uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { runLedger } from "../support/scripted-runner";
import { resultWriter, startAdHocRunner } from "../support/runner";

const STORAGE_FAILED = "storage failed (an R2 put did not go through); try again";
/** Let go once the drill is armed: the run's read waits for it. */
let armed = deferred<void>();
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "storage-failures",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const text: string = ctx.input.text;
      const w = resultWriter(res, ctx.run_id);
      const outcome = (r: { status: number; body: { error?: { code: string; message: string; retryable?: boolean } } }) => [r.status, r.body.error?.code ?? null, r.body.error?.retryable ?? null, r.body.error?.message ?? null];
      const upload = (body: Uint8Array | ReadableStream<Uint8Array>) => uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, body, { name: "u.txt", mime_type: "text/plain" });
      if (text === "uploads") {
        // A body of a known length (streamed to R2 as it arrives), then one without (chunked: put once it is whole).
        const sized = await upload(largeFile(1024 * 1024));
        const chunked = await upload(inChunks(Buffer.from("upload bytes")));
        return w.reply(JSON.stringify({ sized: outcome(sized), chunked: outcome(chunked), again: (await upload(Buffer.from("upload bytes"))).status }));
      }
      if (text === "slow upload") {
        // A sized body still being sent when R2 fails its put: part of it, a pause, then the rest.
        const url = `${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=slow.bin`;
        const slow = await stalledBody(url, { method: "PUT", token: ctx.runtime.api.token, declared: 1024 * 1024, first: 64 * 1024, pauseMs: 300 });
        return w.reply(JSON.stringify({ slow, again: (await upload(Buffer.from("upload bytes"))).status }));
      }
      if (text === "large slow upload") {
        // As above, but what is left of it is past the drain's 4 MiB: the client would be cut anyway, so it is at once,
        // not after waiting out the pause (the drain's 5 s, were it longer) or reading 4 MiB more of it.
        const url = `${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=large.bin`;
        const large = await stalledBody(url, { method: "PUT", token: ctx.runtime.api.token, declared: 6 * 1024 * 1024, first: 64 * 1024, pauseMs: 3_000 });
        return w.reply(JSON.stringify({ large, again: (await upload(Buffer.from("upload bytes"))).status }));
      }
      if (text === "read twice") {
        const read = () => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "artifact.read", { artifact_id: ctx.input.attachments[0].artifact_id });
        await armed.promise;
        const first = await read();
        return w.reply(JSON.stringify({ first: outcome(first), again: (await read()).status }));
      }
      if (text === "inline") {
        w.send("artifact.created", { artifact_type: "file", name: "kept-out.txt", mime_type: "text/plain", content_base64: Buffer.from("inline bytes").toString("base64") });
        return w.reply("done anyway");
      }
      w.reply(`heard: ${text} (${ctx.input.attachments.length} files)`);
    },
  });
  host = await startTestHost({ storageDrill: true });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "storage-failures" });
});
// A drill armed for calls a test did not make is never left to fail the next test's.
afterEach(() => host?.storageFailure(false));
afterAll(async () => {
  host?.storageFailure(false);
  await host?.dispose();
  await runner?.close();
});

const reply = async (runId: string) => JSON.parse(String((await host.waitForRun(runId, 20_000)).message?.content));
const attachment = (text: string) => ({ content_base64: Buffer.from(text).toString("base64"), name: "f.txt", mime_type: "text/plain" });

describe("an event whose attachment R2 fails", () => {
  it("is refused 503 storage_unavailable, saying nothing of R2's words, recorded nowhere; sent again, it runs", async () => {
    const event = messageEvent("fail-ingress", "files", { event_id: "evt-fail-ingress", input: { text: "files", attachments: [attachment("first file"), attachment("second file")] } });
    // The second file's put: the first file is stored, then removed as the event is refused.
    host.storageFailure({ op: "put", key: "artifacts/", skip: 1 });
    const refused = await host.postEvent(event);
    expect([refused.status, refused.body.error]).toEqual([503, { code: "storage_unavailable", message: STORAGE_FAILED }]);
    expect(await host.query("SELECT 1 FROM event_log WHERE event_id = 'evt-fail-ingress'")).toEqual([]);
    expect(await host.query("SELECT 1 FROM run WHERE conversation_id = 'fail-ingress'")).toEqual([]);
    expect(await host.query("SELECT 1 FROM artifact WHERE conversation_id = 'fail-ingress'")).toEqual([]);
    const named = new Set((await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).map((r) => r.r2_key));
    expect((await host.r2Keys("artifacts/")).filter((k) => !named.has(k))).toEqual([]);
    const again = await host.postEvent(event);
    expect([again.status, again.body.disposition]).toEqual([202, "started"]);
    expect((await host.waitForRun(again.body.run_id!, 20_000)).message?.content).toBe("heard: files (2 files)");
  });
});

describe("a runner's call whose R2 call fails", () => {
  it("artifact.upload: a retryable 500 saying storage failed, not a body cut short; uploaded again, stored", async () => {
    host.storageFailure({ op: "put", key: "artifacts/", calls: 2 });
    const posted = await host.postEvent(messageEvent("fail-upload", "uploads"));
    const failed = [500, "runtime_error", true, "the host's storage failed (an R2 put did not go through); it may be tried again"];
    expect(await reply(posted.body.run_id!)).toEqual({ sized: failed, chunked: failed, again: 200 });
    expect(await host.query("SELECT name FROM artifact WHERE run_id = ?", [posted.body.run_id!])).toEqual([{ name: "u.txt" }]);
  });

  it("artifact.upload whose client is still sending: the rest is read first, so the client reads the 500, not a reset", async () => {
    host.storageFailure({ op: "put", key: "artifacts/" });
    const posted = await host.postEvent(messageEvent("fail-upload-slow", "slow upload"));
    expect(await reply(posted.body.run_id!)).toEqual({ slow: { answeredDuringPause: false, status: 500 }, again: 200 });
  });

  it("artifact.upload whose client has more left to send than a drain reads: cut at once, the 500 answered during its pause", async () => {
    host.storageFailure({ op: "put", key: "artifacts/" });
    const posted = await host.postEvent(messageEvent("fail-upload-large", "large slow upload"));
    expect(await reply(posted.body.run_id!)).toEqual({ large: { answeredDuringPause: true, status: 500 }, again: 200 });
  });

  it("artifact.read: a retryable 500 saying storage failed; read again, served", async () => {
    armed = deferred<void>();
    const posted = await host.postEvent(messageEvent("fail-read", "read twice", { input: { text: "read twice", attachments: [attachment("the bytes")] } }));
    // Armed once the attachment is stored: the run's first read of it is the call failed.
    host.storageFailure({ op: "get", key: "artifacts/" });
    armed.resolve();
    expect(await reply(posted.body.run_id!)).toEqual({
      first: [500, "runtime_error", true, "the host's storage failed (an R2 get did not go through); it may be tried again"],
      again: 200,
    });
  });
});

describe("an inline artifact whose put R2 fails each time", () => {
  it("is tried again, then dropped with a warning saying R2 failed it; the run completes", async () => {
    // A run's put is tried four times (run/blob-put.ts).
    host.storageFailure({ op: "put", key: "artifacts/", calls: 4 });
    const posted = await host.postEvent(messageEvent("fail-inline", "inline"));
    const run = await host.waitForRun(posted.body.run_id!, 20_000);
    expect([run.status, run.message?.content]).toEqual(["completed", "done anyway"]);
    const ledger = (await runLedger(host, run.run_id)) as { type: string; data: { code?: string; message?: string } }[];
    const warnings = ledger.filter((e) => e.type === "host.warning").map((e) => [e.data.code, e.data.message]);
    expect(warnings).toEqual([["result.artifact_unstored", expect.stringMatching(/\(R2 failed a put of artifacts\/\S+: put: We encountered an internal error\. Please try again\. \(10001\), 4 attempts\)$/)]]);
    expect(await host.query("SELECT 1 FROM artifact WHERE run_id = ?", [run.run_id])).toEqual([]);
  });
});
