import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "inline-artifacts",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "claims")
        w.send("artifact.created", { artifact_type: "file", name: "report.txt", mime_type: "text/plain", sha256: CLAIMED_SHA256, size_bytes: 3, content_base64: REPORT.toString("base64") });
      else w.send("artifact.created", { artifact_type: "file", name: "empty.txt", mime_type: "text/plain", content_base64: "" });
      w.reply("attached");
    },
  });
  host = await startTestHost();
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
