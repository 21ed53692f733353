import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { runLedger } from "../support/scripted-runner";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * Artifacts when the database fails: a blob stays exactly as long as a row
 * may name it. A write the database refused leaves no blob behind; a write
 * that got no answer (past DB_QUERY_TIMEOUT_MS, yet committed) keeps its
 * blob, so the row it wrote never names bytes that are gone. A denied upload
 * whose audit record cannot be written is still a 403 in the Host API shape.
 * When R2 refuses an inline artifact's bytes, its put is tried again; refused
 * throughout, only that artifact is lost: the rest of its batch (deltas, a
 * message, state, other artifacts) is written.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "artifact-faults",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const api = (action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      const upload = () => uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, Buffer.from("upload bytes"), { name: "u.txt", mime_type: "text/plain" });
      const text: string = ctx.input.text;
      if (text === "read attachments") {
        const reads = [];
        for (const a of ctx.input.attachments) reads.push((await api("artifact.read", { artifact_id: a.artifact_id })).status);
        return w.reply(JSON.stringify(reads));
      }
      if (text === "inline") {
        // The inline artifact goes in a batch of its own, then the answer.
        w.send("artifact.created", { artifact_type: "file", name: "report.txt", mime_type: "text/plain", content_base64: Buffer.from("inline bytes").toString("base64") });
        await new Promise((r) => setTimeout(r, 300));
        return w.reply("done");
      }
      if (text === "held batch" || text === "end batch") {
        // The first delta is the run's first write, made at once: what follows is held, within RUN_WRITE_INTERVAL_MS, in one batch.
        w.send("message.delta", { chunk: { role: "assistant", content: "Here " } });
        await new Promise((r) => setTimeout(r, 50));
        w.send("message.delta", { chunk: { role: "assistant", content: "they are" } });
        // Named by the runner's own ids, which its message uses too.
        w.send("artifact.created", { artifact_id: "mine-1", artifact_type: "file", name: "lost.txt", mime_type: "text/plain", content_base64: Buffer.from(UNSTORABLE).toString("base64") });
        w.send("artifact.created", { artifact_id: "mine-2", artifact_type: "file", name: "kept.txt", mime_type: "text/plain", content_base64: Buffer.from("kept bytes").toString("base64") });
        w.send("state.updated", { scope: "conversation", key: "filed", value: text });
        w.send("message.completed", { message: { role: "assistant", content: [{ type: "text", text: "Here they are" }, { type: "file", artifact_id: "mine-1" }, { type: "file", artifact_id: "mine-2" }] } });
        // "held batch": the runner goes on working, so that batch is written before the run's end; "end batch": with it.
        if (text === "held batch") await new Promise((r) => setTimeout(r, 400));
        w.send("run.completed", { finish_reason: "stop" });
        return void res.end();
      }
      if (text === "upload") {
        const up = await upload();
        return w.reply(JSON.stringify({ status: up.status, code: up.body.error?.code }));
      }
      // "denied": this conversation's agent grants no artifacts.
      const read = await api("artifact.read", { artifact_id: "art_x" });
      const up = await upload();
      w.reply(JSON.stringify({ read: [read.status, read.body.error?.code], upload: [up.status, up.body] }));
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000" }, storageDrill: true });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "artifact-faults" });
  const denied = { agent_id: "denied", name: "denied", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "denied" }, resource_policy: { allow: { artifacts: [] } } };
  expect((await host.admin("POST", "/v1/admin/agents", denied)).status).toBe(201);
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

/** The content of the inline artifact whose put R2 refuses (the drill matches it). */
const UNSTORABLE = "bytes R2 will not store";
const reply = async (runId: string) => JSON.parse(String((await host.waitForRun(runId, 30_000)).message?.content));
/** Blobs no artifact row names (retention finds blobs only through rows, so these would stay forever). */
const unnamedBlobs = async () => {
  const named = new Set((await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).map((r) => r.r2_key));
  return (await host.r2Keys("artifacts/")).filter((k) => !named.has(k));
};
/** Rows naming a blob that is gone. */
const rowsWithoutBlob = async () => {
  const keys = new Set(await host.r2Keys("artifacts/"));
  return (await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).filter((r) => !keys.has(r.r2_key));
};

describe("artifacts when the database fails", () => {
  it("an ingress batch that times out but commits keeps its attachments' blobs: the retry's run reads them", async () => {
    const event = messageEvent("timeout-ingress", "read attachments", {
      event_id: "evt-timeout-ingress",
      input: { text: "read attachments", attachments: [{ content_base64: Buffer.from("hello file").toString("base64"), name: "f.txt", mime_type: "text/plain" }] },
    });
    // The batch reaches the database, which answers after DB_QUERY_TIMEOUT_MS: the Worker gives up, the database commits.
    host.databaseOutage({ delayMs: 2_500, matching: 'INSERT INTO \\"artifact\\"' });
    const first = await host.postEvent(event);
    expect(first.status).toBeGreaterThanOrEqual(500);
    const committed = await waitForRow("SELECT 1 FROM event_log WHERE event_id = 'evt-timeout-ingress'");
    expect(committed).toBe(true);
    expect(await rowsWithoutBlob()).toEqual([]);
    const retry = await host.postEvent(event);
    expect(retry.body.disposition).toBe("duplicate");
    expect(await reply(retry.body.run_id!)).toEqual([200]);
  });

  it("an upload whose row insert times out but commits keeps its blob", async () => {
    host.databaseOutage({ delayMs: 2_500, matching: 'INSERT INTO \\"artifact\\"' });
    const posted = await host.postEvent(messageEvent("timeout-upload", "upload"));
    // Answered as the host's retryable fault.
    expect(await reply(posted.body.run_id!)).toEqual({ status: 500, code: "runtime_error" });
    expect(await waitForRow("SELECT 1 FROM artifact WHERE name = 'u.txt'")).toBe(true);
    expect(await rowsWithoutBlob()).toEqual([]);
  });

  it("an inline artifact whose row the database refuses leaves no blob behind, and no item names it", async () => {
    // Refused on each try (a run's write is tried four times).
    host.databaseOutage({ queries: 4, matching: 'INSERT INTO \\"artifact\\"' });
    const posted = await host.postEvent(messageEvent("refused-inline", "inline"));
    expect((await host.waitForRun(posted.body.run_id!, 30_000)).status).toBe("failed");
    expect(await unnamedBlobs()).toEqual([]);
    // Nor does any transcript item name the artifact that was never stored.
    const items = await host.query<{ artifact_refs_json: string | null }>("SELECT artifact_refs_json FROM transcript WHERE run_id = ?", [posted.body.run_id!]);
    const named: string[] = items.flatMap((i) => JSON.parse(i.artifact_refs_json ?? "[]").map((r: { artifact_id: string }) => r.artifact_id));
    const stored = new Set((await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact")).map((r) => r.artifact_id));
    expect(named.filter((id) => !stored.has(id))).toEqual([]);
  });

  it("a denied upload whose audit record cannot be written is still answered 403 unauthorized, as a denied call is", async () => {
    host.databaseOutage({ queries: 2, matching: "host_api.denied" });
    const posted = await host.postEvent(messageEvent("denied", "denied"));
    const answer = await reply(posted.body.run_id!);
    expect(answer.read).toEqual([403, "unauthorized"]);
    expect(answer.upload[0]).toBe(403);
    expect(answer.upload[1]).toMatchObject({ ok: false, error: { code: "unauthorized" } });
  });
});

describe("an inline artifact R2 will not store", () => {
  for (const text of ["held batch", "end batch"]) {
    it(`costs only that artifact, recorded as dropped; the rest of its batch is written; its item names it nowhere (${text})`, async () => {
      const conv = `r2-${text.replace(" ", "-")}`;
      // Lasting: each try of its put is refused.
      host.storageOutage({ puts: 100, matching: UNSTORABLE });
      const posted = await host.postEvent(messageEvent(conv, text));
      const run = await host.waitForRun(posted.body.run_id!, 30_000);
      host.storageOutage(false);
      expect([run.status, textOf(run.message?.content)]).toEqual(["completed", "Here they are"]);
      const ledger = (await runLedger(host, run.run_id)) as { seq: number; type: string; origin: string; data: any }[];
      expect(ledger.filter((e) => e.origin === "runner").map((e) => e.type)).toEqual(["message.delta", "message.delta", "artifact.created", "artifact.created", "state.updated", "message.completed", "run.completed"]);
      const [lost, kept] = ledger.filter((e) => e.type === "artifact.created");
      // The lost one: the host's note names it by its ledger entry, as a refused reference's does, and an audit record says so.
      const warnings = ledger.filter((e) => e.type === "host.warning");
      expect(warnings).toEqual([expect.objectContaining({ origin: "host", data: expect.objectContaining({ code: "result.artifact_unstored", ledger_seq: lost.seq, message: expect.stringMatching(/storage drill.*, 4 attempts\)$/) }) })]);
      const audits = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [run.run_id]);
      expect(audits.map((a) => JSON.parse(a.data_json))).toEqual([expect.objectContaining({ result_type: "artifact.created", ledger_seq: lost.seq, artifact_id: lost.data.artifact_id })]);
      // The kept one is stored, and the answer carries it alone.
      const rows = await host.query<{ artifact_id: string; name: string }>("SELECT artifact_id, name FROM artifact WHERE run_id = ?", [run.run_id]);
      expect(rows).toEqual([{ artifact_id: kept.data.artifact_id, name: "kept.txt" }]);
      const items = await host.query<{ content: string; content_json: string; artifact_refs_json: string | null }>("SELECT content, content_json, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant'", [run.run_id]);
      expect(items.map((i) => [i.content, JSON.parse(i.artifact_refs_json ?? "[]").map((r: { name: string }) => r.name)])).toEqual([["Here they are", ["kept.txt"]]]);
      // Its item's content names only what was stored; the ledger keeps the message as the runner sent it (stored ids in place of its own).
      const sent = [{ type: "text", text: "Here they are" }, { type: "file", artifact_id: lost.data.artifact_id }, { type: "file", artifact_id: kept.data.artifact_id }];
      expect(JSON.parse(items[0].content_json)).toEqual([sent[0], sent[2]]);
      expect(ledger.find((e) => e.type === "message.completed")?.data.message.content).toEqual(sent);
      const state = await host.query<{ value_json: string }>("SELECT value_json FROM runner_state WHERE key = 'filed'");
      expect(state.map((r) => JSON.parse(r.value_json))).toContain(text);
      expect(await unnamedBlobs()).toEqual([]);
    });
  }
});

describe("an inline artifact R2 refuses once", () => {
  it("is tried again and kept: nothing of the run is lost", async () => {
    host.storageOutage({ puts: 1, matching: UNSTORABLE });
    const posted = await host.postEvent(messageEvent("r2-blip", "end batch"));
    const run = await host.waitForRun(posted.body.run_id!, 30_000);
    host.storageOutage(false);
    expect(run.status).toBe("completed");
    const ledger = (await runLedger(host, run.run_id)) as { type: string; data: any }[];
    expect(ledger.filter((e) => e.type === "host.warning")).toEqual([]);
    const rows = await host.query<{ artifact_id: string; name: string }>("SELECT artifact_id, name FROM artifact WHERE run_id = ? ORDER BY name", [run.run_id]);
    expect(rows.map((r) => r.name)).toEqual(["kept.txt", "lost.txt"]);
    expect(Buffer.from((await host.r2Object(`artifacts/${rows[1].artifact_id}`))!).toString()).toBe(UNSTORABLE);
    const [item] = await host.query<{ content_json: string; artifact_refs_json: string }>("SELECT content_json, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant'", [run.run_id]);
    expect(JSON.parse(item.artifact_refs_json).map((r: { name: string }) => r.name).sort()).toEqual(["kept.txt", "lost.txt"]);
    expect(JSON.parse(item.content_json).filter((el: { type: string }) => el.type === "file")).toHaveLength(2);
  });
});

/** A message's text: a string, or its text elements. */
const textOf = (content: unknown) => (typeof content === "string" ? content : (content as { type: string; text?: string }[]).map((el) => el.text ?? "").join(""));

/** Whether a row shows up within a few seconds (a write the Worker gave up on, committed late). */
async function waitForRow(sql: string): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    if ((await host.query(sql)).length) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
