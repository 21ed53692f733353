import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred, rawUpload, stalledBody, uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

const MiB = 1024 * 1024;
const UPLOAD_MAX = 3 * MiB; // ARTIFACT_UPLOAD_MAX_BYTES of this host
const RUN_UPLOAD_MAX = 4 * MiB; // ARTIFACT_UPLOAD_RUN_MAX_BYTES of this host
/** 2.5 MiB with a position-dependent pattern, so a misplaced window shows. */
const BIG = Buffer.from(Array.from({ length: 2.5 * MiB }, (_, i) => (i * 31 + (i >> 10)) & 0xff));

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let foreignArtifactId = "";
/** An upload still arriving when its run is cancelled. */
const acrossCancel = { midUpload: deferred<string>(), cancelled: deferred(), answer: deferred<Awaited<ReturnType<typeof stalledBody>>>() };

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "artifacts",
    runners: [
      { name: "default", label: { en_US: "artifacts" }, capabilities: {}, permissions: { history: ["page"], artifacts: ["metadata", "read"] } },
      { name: "plain", label: { en_US: "plain" }, capabilities: {}, permissions: { history: ["page"] } },
    ],
    async onRun({ body }, res) {
      const ctx = body.context;
      const base = ctx.runtime.api.base_url;
      const token = ctx.runtime.api.token;
      const api = (action: string, params: Record<string, unknown>) => callHostApi(base, ctx.run_id, token, action, params);
      const upload = (bytes: Uint8Array | ReadableStream<Uint8Array>, query: Record<string, string> = {}, as = token) => uploadArtifact(base, ctx.run_id, as, bytes, query);
      const w = resultWriter(res, ctx.run_id);
      const out: Record<string, any> = {};
      switch (ctx.input.text) {
        case "upload": {
          const up = await upload(BIG, { name: "big.bin", mime_type: "application/octet-stream" });
          out.upload = up;
          const id = up.body.data.artifact_id;
          const windows = [];
          for (let offset = 0; offset < BIG.length; offset += MiB) windows.push((await api("artifact.read", { artifact_id: id, offset })).body.data);
          out.windows = windows.map((d) => ({ offset: d.offset, length: d.length, has_more: d.has_more, size_bytes: d.size_bytes }));
          out.windows_equal = Buffer.concat(windows.map((d) => Buffer.from(d.content_base64, "base64"))).equals(BIG);
          const small = (await api("artifact.read", { artifact_id: id, offset: 5, length: 10 })).body.data;
          out.small = { ...small, equal: Buffer.from(small.content_base64, "base64").equals(BIG.subarray(5, 15)) };
          out.past_end = (await api("artifact.read", { artifact_id: id, offset: BIG.length + 10 })).body.data;
          // Over the window cap: the cap, as LangBot's host takes it.
          const tooLong = await api("artifact.read", { artifact_id: id, length: MiB + 1 });
          out.too_long = { status: tooLong.status, length: tooLong.body.data?.length, has_more: tooLong.body.data?.has_more };
          out.metadata = (await api("artifact.metadata", { artifact_id: id })).body.data;
          out.empty = await upload(new Uint8Array(), { name: "empty.txt", mime_type: "text/plain" });
          out.truncated = await rawUpload(base, ctx.run_id, token, { declared: 100, body: "0123456789", end: true });
          out.too_big = await upload(Buffer.alloc(UPLOAD_MAX + 1));
          // Chunked (no Content-Length): it takes the budget a part at a time and gives back what it did not use.
          out.chunked = await upload(new Blob([Buffer.from("no length")]).stream(), { name: "chunked.txt", mime_type: "text/plain" });
          out.bad_token = await upload(Buffer.from("x"), {}, "not-the-token");
          out.bad_query = await upload(Buffer.from("x"), { artifact_type: "t".repeat(65) });
          // Strict as every Host API call's params: a misspelt option is refused, not an artifact stored without it.
          out.misspelt_query = await upload(Buffer.from("png"), { mimetype: "image/png", filename: "chart.png" });
          // §8: the token before the payload.
          out.bad_query_bad_token = await upload(Buffer.from("x"), { artifact_type: "t".repeat(65) }, "not-the-token");
          // 2.5 MiB spent (the truncated body's 100 declared bytes were given back): 1.5 MiB more is over the run's budget, 1 MiB is not.
          out.over_budget = await upload(Buffer.alloc(1.5 * MiB));
          // Refused before being read, the body is still drained: the answer waits for it, so the client reads it, never a reset.
          out.refused_stalled = await stalledBody(`${base}/v1/runs/${ctx.run_id}/artifacts`, { method: "PUT", token, declared: 1.5 * MiB, first: 64 * 1024, pauseMs: 300 });
          out.within_budget = await upload(Buffer.alloc(MiB), { name: "last.bin" });
          // What is left now is under 0.5 MiB: a chunked body larger than that is cut off and refused, nothing kept.
          out.chunked_too_big = await upload(new Blob([Buffer.alloc(600 * 1024)]).stream(), { name: "too-big.bin" });
          out.foreign_read = await api("artifact.read", { artifact_id: foreignArtifactId });
          out.foreign_metadata = await api("artifact.metadata", { artifact_id: foreignArtifactId });
          out.unknown_read = await api("artifact.read", { artifact_id: "art_nope" });
          // The runner's claims (name, size) are not what gets recorded; foreign and unknown ids are refused.
          w.send("artifact.created", { artifact_type: "file", artifact_id: id, name: "claimed.txt", size_bytes: 1 });
          w.send("artifact.created", { artifact_type: "image", artifact_id: foreignArtifactId });
          w.send("artifact.created", { artifact_type: "file", artifact_id: "art_nope" });
          return w.reply(JSON.stringify(out));
        }
        case "history": {
          out.with = (await api("history.page", { limit: 2, include_artifacts: true })).body.data.items;
          out.without = (await api("history.page", { limit: 2 })).body.data.items;
          const uploaded = out.with[1].artifact_refs[0]?.artifact_id;
          out.read_in_later_run = (await api("artifact.read", { artifact_id: uploaded, length: 4 })).status;
          // Each run has its own upload budget.
          out.fresh_budget = (await upload(Buffer.alloc(2 * MiB))).status;
          // §8 lists artifact.upload with the actions, but it is the PUT: called as one, the answer says where it is.
          out.upload_as_action = { ...(await api("artifact.upload", { name: "notes.txt" })), run_id: ctx.run_id };
          return w.reply(JSON.stringify(out));
        }
        case "upload across a cancel": {
          // Half the body, then the test cancels the run, then the rest.
          const answer = await stalledBody(`${base}/v1/runs/${ctx.run_id}/artifacts?name=late.bin`, {
            method: "PUT",
            token,
            declared: 2000,
            first: 1000,
            pauseMs: 0,
            duringPause: async () => {
              acrossCancel.midUpload.resolve(ctx.run_id);
              await acrossCancel.cancelled.promise;
            },
          });
          acrossCancel.answer.resolve(answer);
          res.end();
          return;
        }
        case "no permission": {
          out.upload = await upload(Buffer.from("x"));
          out.read = await api("artifact.read", { artifact_id: foreignArtifactId });
          return w.reply(JSON.stringify(out));
        }
        default:
          return w.reply(JSON.stringify(ctx.input.attachments));
      }
    },
  });
  host = await startTestHost({ captureLogs: true, vars: { ARTIFACT_UPLOAD_MAX_BYTES: String(UPLOAD_MAX), ARTIFACT_UPLOAD_RUN_MAX_BYTES: String(RUN_UPLOAD_MAX) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "artifacts" });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId("plain"), agentId: "plain", scope: { type: "conversation", id: "art-noperm" } });

  // An artifact of another conversation, for the scope checks.
  const other = await host.postEvent(messageEvent("art-other", "keep", { input: { text: "keep", attachments: [{ content_base64: "c2VjcmV0", name: "secret.txt" }] } }));
  foreignArtifactId = JSON.parse(String((await host.waitForRun(other.body.run_id!)).message?.content))[0].artifact_id;
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function resultOf(text: string, conversationId = "art-main") {
  const posted = await host.postEvent(messageEvent(conversationId, text));
  const run = await host.waitForRun(posted.body.run_id!);
  expect(run.status).toBe("completed");
  return { runId: posted.body.run_id!, out: JSON.parse(String(run.message?.content)) };
}

describe("artifact Host API", () => {
  let uploaded: any;
  let uploadRunId = "";

  it("uploads a streamed body, reads it back in ≤ 1 MiB windows, and refuses what it must", async () => {
    const { runId, out } = await resultOf("upload");
    uploadRunId = runId;
    expect(out.upload.status).toBe(200);
    uploaded = out.upload.body.data;
    expect(uploaded).toMatchObject({
      artifact_type: "file",
      mime_type: "application/octet-stream",
      name: "big.bin",
      size_bytes: BIG.length,
      sha256: createHash("sha256").update(BIG).digest("hex"),
      source: "upload",
      conversation_id: "art-main",
      run_id: runId,
      runner_id: runner.runnerId(),
    });
    expect(out.metadata).toEqual(uploaded);
    expect(Buffer.from((await host.r2Object(`artifacts/${uploaded.artifact_id}`))!).equals(BIG)).toBe(true);

    expect(out.windows).toEqual([
      { offset: 0, length: MiB, has_more: true, size_bytes: BIG.length },
      { offset: MiB, length: MiB, has_more: true, size_bytes: BIG.length },
      { offset: 2 * MiB, length: 0.5 * MiB, has_more: false, size_bytes: BIG.length },
    ]);
    expect(out.windows_equal).toBe(true);
    expect(out.small).toMatchObject({ offset: 5, length: 10, has_more: true, equal: true });
    expect(out.past_end).toMatchObject({ length: 0, content_base64: "", has_more: false });
    expect(out.too_long).toEqual({ status: 200, length: MiB, has_more: true });

    expect(out.empty.body.data).toMatchObject({ artifact_type: "file", name: "empty.txt", size_bytes: 0, sha256: createHash("sha256").digest("hex") });
    // A body shorter than its Content-Length: R2 refuses the FixedLengthStream, nothing is kept.
    expect(out.truncated).toMatch(/^HTTP\/1\.1 400/);
    expect(out.truncated).toContain('"code":"invalid_argument","message":"the body ended after 10 of 100 bytes"');
    expect([out.too_big.status, out.too_big.body.error.code]).toEqual([413, "payload_too_large"]);
    expect(out.too_big.body.error.message).toMatch(/ARTIFACT_UPLOAD_MAX_BYTES/);
    expect(out.chunked.body.data).toMatchObject({ name: "chunked.txt", mime_type: "text/plain", size_bytes: 9, sha256: createHash("sha256").update("no length").digest("hex") });
    expect(Buffer.from((await host.r2Object(`artifacts/${out.chunked.body.data.artifact_id}`))!).toString()).toBe("no length");
    expect([out.chunked_too_big.status, out.chunked_too_big.body.error.code]).toEqual([413, "payload_too_large"]);
    expect(out.chunked_too_big.body.error.message).toMatch(/outgrew the 524279 bytes this upload may take/);
    expect([out.bad_token.status, out.bad_token.body.error.code]).toEqual([401, "unauthorized"]);
    expect([out.bad_query.status, out.bad_query.body.error.code]).toEqual([400, "invalid_argument"]);
    expect([out.misspelt_query.status, out.misspelt_query.body.error.code]).toEqual([400, "invalid_argument"]);
    expect(out.misspelt_query.body.error.message).toMatch(/mimetype/);
    expect([out.bad_query_bad_token.status, out.bad_query_bad_token.body.error.code]).toEqual([401, "unauthorized"]);
    expect([out.over_budget.status, out.over_budget.body.error.code]).toEqual([413, "payload_too_large"]);
    // The chunked upload's unused reservation and the truncated body's declared length came back: only the chunked upload's 9 bytes count.
    expect(out.over_budget.body.error.message).toMatch(/ARTIFACT_UPLOAD_RUN_MAX_BYTES \(1572855 of 4194304\)/);
    expect(out.within_budget.body.data).toMatchObject({ name: "last.bin", size_bytes: MiB });
    expect(out.refused_stalled).toEqual({ answeredDuringPause: false, status: 413 });
    expect([out.foreign_read.status, out.foreign_read.body.error.code]).toEqual([403, "unauthorized"]);
    expect([out.foreign_metadata.status, out.foreign_metadata.body.error.code]).toEqual([403, "unauthorized"]);
    expect([out.unknown_read.status, out.unknown_read.body.error.code]).toEqual([404, "not_found"]);
    // Refused uploads stored nothing: R2 holds the other conversation's input and the four accepted uploads.
    expect(await host.query("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId])).toHaveLength(4);
    const accepted = [uploaded, out.empty.body.data, out.chunked.body.data, out.within_budget.body.data].map((a) => a.artifact_id);
    expect((await host.r2Keys("artifacts/")).sort()).toEqual([foreignArtifactId, ...accepted].map((id) => `artifacts/${id}`).sort());

    // Every upload decision is logged (§8), the ones that failed later included: the truncated body was allowed.
    const uploads = () => host.decisions(runId).filter((d) => d.action === "artifact.upload").map((d) => [d.outcome, d.status]);
    await expect.poll(uploads).toEqual([
      ...Array(3).fill(["allowed", 200]),
      ["payload_too_large", 413],
      ["allowed", 200],
      ["unauthorized", 401],
      ["invalid_argument", 400],
      ["invalid_argument", 400],
      ["unauthorized", 401],
      ["payload_too_large", 413],
      ["payload_too_large", 413],
      ["allowed", 200],
      ["allowed", 200],
    ]);

    // Denied reads are audited in EventLog.
    const denied = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'host_api.denied' AND run_id = ?", [runId]);
    expect(denied.map((d) => JSON.parse(d.data_json)).map((d) => [d.action, d.resource.artifact_id]).sort()).toEqual([
      ["artifact.metadata", foreignArtifactId],
      ["artifact.read", foreignArtifactId],
    ]);
  });

  it("attaches an uploaded artifact named by artifact.created to the next assistant item, with the stored facts", async () => {
    const { out } = await resultOf("history");
    const [user, assistant] = out.with;
    expect(user).toMatchObject({ role: "user", content: "history" });
    expect(assistant.role).toBe("assistant");
    expect(assistant.artifact_refs).toEqual([
      { artifact_id: uploaded.artifact_id, artifact_type: "file", mime_type: "application/octet-stream", name: "big.bin", size_bytes: BIG.length },
    ]);
    expect(out.without.map((i: any) => i.artifact_refs)).toEqual([[], []]);
    // The conversation's later runs may read what an earlier run uploaded.
    expect(out.read_in_later_run).toBe(200);
    expect(out.fresh_budget).toBe(200);
    const { status, body, run_id } = out.upload_as_action;
    expect([status, body.error.code]).toEqual([404, "not_found"]);
    expect(body.error.message).toContain(`PUT /v1/runs/${run_id}/artifacts?name=&mime_type=&artifact_type=`);

    // Refused references are audited, not attached.
    const dropped = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [uploadRunId]);
    expect(dropped.map((d) => JSON.parse(d.data_json).reason).sort()).toEqual([
      `artifact ${foreignArtifactId} belongs to another conversation`,
      "artifact art_nope does not exist",
    ]);
  });

  it("refuses upload and reads to a run whose snapshot lacks the artifacts permission, and a finished run's token", async () => {
    const { runId, out } = await resultOf("no permission", "art-noperm");
    expect([out.upload.status, out.upload.body.error.code]).toEqual([403, "unauthorized"]);
    expect([out.read.status, out.read.body.error.code]).toEqual([403, "unauthorized"]);
    const denied = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'host_api.denied' AND run_id = ?", [runId]);
    expect(denied.map((d) => JSON.parse(d.data_json).action).sort()).toEqual(["artifact.read", "artifact.upload"]);
    // An upload's denial is in the run's ledger too, as any call's.
    const ledger = (await host.admin("GET", `/v1/runs/${runId}/events`)).body.items as { type: string; data: { action: string } }[];
    expect(ledger.filter((e) => e.type === "host_api.denied").map((e) => e.data.action).sort()).toEqual(["artifact.read", "artifact.upload"]);

    const ended = runner.calls.find((c) => c.body.context.run_id === uploadRunId)!.body.context.runtime.api.token;
    const late = await uploadArtifact(host.url, uploadRunId, ended, Buffer.from("late"));
    expect([late.status, late.body.error?.code]).toEqual([401, "unauthorized"]);
  });

  it("keeps nothing of an upload still arriving when its run is cancelled: the token held only while the run was active", async () => {
    const blobsBefore = await host.r2Keys("artifacts/");
    await host.postEvent(messageEvent("art-cancel", "upload across a cancel"));
    const runId = await acrossCancel.midUpload.promise;
    expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await host.waitForRun(runId)).status).toBe("cancelled");
    acrossCancel.cancelled.resolve();
    expect(await acrossCancel.answer.promise).toEqual({ answeredDuringPause: false, status: 401 });
    expect(await host.query("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId])).toEqual([]);
    // Nor its blob: no key is stored that was not there before (keys are `artifacts/<id>`, the id unknown to the runner here).
    expect((await host.r2Keys("artifacts/")).filter((k) => !blobsBefore.includes(k))).toEqual([]);
    await expect.poll(() => host.decisions(runId).filter((d) => d.action === "artifact.upload").map((d) => [d.outcome, d.status])).toEqual([
      ["allowed", 200],
      ["unauthorized", 401],
    ]);
  });

  it("keeps history and unexpired artifacts when the cron runs without RETENTION_DAYS", async () => {
    const count = async (table: string) => (await host.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))[0].n;
    const before = { events: await count("event_log"), transcript: await count("transcript"), artifacts: await count("artifact") };
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 2 * 24 * 3600 * 1000) });
    expect({ events: await count("event_log"), transcript: await count("transcript"), artifacts: await count("artifact") }).toEqual(before);
    expect(await host.r2Keys("artifacts/")).toHaveLength(before.artifacts);
  });
});
