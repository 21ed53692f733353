import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { runLedger } from "../support/scripted-runner";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * `artifact.created` with inline content: what the host keeps of it is the
 * stored facts, never the runner's claims, and empty content is a 0-byte
 * artifact as an upload of nothing is.
 */
const REPORT = Buffer.from("the quarterly report, as the runner produced it");
const CLAIMED_SHA256 = "ab".repeat(32);
const INLINE_CAP = 1024 * 1024;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "inline-artifacts",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "history") {
        const page = async (params: Record<string, unknown>) => (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", params)).body.data;
        return w.reply(JSON.stringify({ without: await page({ limit: 3 }), with: await page({ limit: 3, include_artifacts: true }) }));
      }
      if (ctx.input.text === "trailing") {
        // A file announced after the run's last message: an item of its own.
        w.send("message.completed", { message: { role: "assistant", content: "here it comes" } });
        w.send("artifact.created", { artifact_type: "file", name: "late.txt", mime_type: "text/plain", content_base64: REPORT.toString("base64") });
        w.send("run.completed", { finish_reason: "stop" });
        res.end();
        return;
      }
      if (ctx.input.text === "at-cap" || ctx.input.text === "over-cap") {
        // PROTOCOL §7's hard cap, 1 MiB decoded (the line limit is raised here so such a line can be sent at all).
        const bytes = Buffer.alloc(INLINE_CAP + (ctx.input.text === "over-cap" ? 1 : 0), 7);
        w.send("artifact.created", { artifact_type: "file", name: `${ctx.input.text}.bin`, content_base64: bytes.toString("base64") });
      } else if (ctx.input.text === "claims")
        w.send("artifact.created", { artifact_type: "file", name: "report.txt", mime_type: "text/plain", sha256: CLAIMED_SHA256, size_bytes: 3, content_base64: REPORT.toString("base64") });
      else w.send("artifact.created", { artifact_type: "file", name: "empty.txt", mime_type: "text/plain", content_base64: "" });
      w.reply("attached");
    },
  });
  host = await startTestHost({ vars: { RUNNER_MAX_LINE_BYTES: String(2 * INLINE_CAP) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "inline-artifacts" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function attachedBy(text: string) {
  const posted = await host.postEvent(messageEvent(`inline-${text}`, text));
  const run = await host.waitForRun(posted.body.run_id!);
  expect(run.status).toBe("completed");
  const rows = await host.query<{ artifact_id: string; size_bytes: number; sha256: string; name: string }>("SELECT artifact_id, size_bytes, sha256, name FROM artifact WHERE run_id = ?", [run.run_id]);
  const entry = (await runLedger(host, run.run_id)).find((e) => e.type === "artifact.created")!;
  const dropped = await host.query("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [run.run_id]);
  const [item] = await host.query<{ artifact_refs_json: string | null }>("SELECT artifact_refs_json FROM transcript WHERE conversation_id = ? AND role = 'assistant'", [`inline-${text}`]);
  return { rows, entry, dropped, refs: JSON.parse(item.artifact_refs_json ?? "[]") };
}

describe("inline artifact.created", () => {
  it("records the stored artifact's size and digest in the ledger, in place of the runner's claims", async () => {
    const { rows, entry } = await attachedBy("claims");
    const digest = createHash("sha256").update(REPORT).digest("hex");
    expect(rows).toEqual([{ artifact_id: expect.any(String), size_bytes: REPORT.length, sha256: digest, name: "report.txt" }]);
    expect(entry.data).toMatchObject({ artifact_id: rows[0].artifact_id, size_bytes: REPORT.length, sha256: digest });
    expect(entry.data).not.toHaveProperty("content_base64");
  });

  it("stores empty content as a 0-byte artifact attached to the reply, not as a dropped result", async () => {
    const { rows, entry, dropped, refs } = await attachedBy("empty");
    expect(dropped).toEqual([]);
    expect(rows).toEqual([{ artifact_id: expect.any(String), size_bytes: 0, sha256: createHash("sha256").digest("hex"), name: "empty.txt" }]);
    expect(entry.data).toMatchObject({ artifact_id: rows[0].artifact_id, size_bytes: 0 });
    expect(refs).toEqual([expect.objectContaining({ artifact_id: rows[0].artifact_id, size_bytes: 0, name: "empty.txt" })]);
  });
});

describe("inline content and its 1 MiB cap (decoded)", () => {
  it("stores content at the cap; one byte more drops the result with an audit, and the run completes without it", async () => {
    const atCap = await attachedBy("at-cap");
    expect([atCap.rows.map((r) => r.size_bytes), atCap.dropped]).toEqual([[INLINE_CAP], []]);
    const over = await attachedBy("over-cap");
    expect({ rows: over.rows, refs: over.refs, dropped: over.dropped.map((d: any) => JSON.parse(d.data_json).result_type) }).toEqual({ rows: [], refs: [], dropped: ["artifact.created"] });
    expect(JSON.parse((over.dropped[0] as any).data_json).reason).toContain("upload it with artifact.upload");
  });
});

describe("an item of artifacts (announced after a run's last message)", () => {
  it("is in history.page only with include_artifacts: never an item without content or refs", async () => {
    const trailing = await host.postEvent(messageEvent("inline-history", "trailing"));
    expect((await host.waitForRun(trailing.body.run_id!)).status).toBe("completed");
    const posted = await host.postEvent(messageEvent("inline-history", "history"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect(run.status).toBe("completed");
    const pages = JSON.parse(String(run.message?.content));
    const shape = (items: any[]) => items.map((i) => [i.role, i.item_type, i.content ?? null, i.artifact_refs.map((r: any) => r.name)]);
    // Newest first: this run's message, then the run before it (its file item with refs, or not at all).
    expect(shape(pages.with.items)).toEqual([
      ["user", "message", "history", []],
      ["assistant", "artifacts", null, ["late.txt"]],
      ["assistant", "message", "here it comes", []],
    ]);
    expect(shape(pages.without.items)).toEqual([
      ["user", "message", "history", []],
      ["assistant", "message", "here it comes", []],
      ["user", "message", "trailing", []],
    ]);
    expect(pages.without.has_more).toBe(false);
    const admin = async (include: string) => shape((await host.admin("GET", `/v1/conversations/transcript?conversation_id=inline-history&include_artifacts=${include}`)).body.items);
    // The operator's transcript reads the same way (this run's reply is in it by now).
    expect((await admin("false")).map((i) => i[1])).toEqual(["message", "message", "message", "message"]);
    expect((await admin("true")).map((i) => i[1])).toEqual(["message", "message", "artifacts", "message", "message"]);
  });
});
