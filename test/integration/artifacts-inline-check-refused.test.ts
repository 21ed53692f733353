import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * README: a write the database refused leaves nothing behind. A result batch whose artifact-reference lookup failed
 * used to have put its inline artifacts' blobs already: no row ever named them, and the run's last transcript item did.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "rv-inline-check",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const line = (type: string, data: unknown, sequence: number) => `${JSON.stringify({ run_id: runId, type, data, sequence })}\n`;
      // One chunk: an inline artifact and a reference to an uploaded one (whose lookup the database refuses).
      res.write(
        line("artifact.created", { artifact_type: "file", name: "inline.txt", mime_type: "text/plain", content_base64: Buffer.from("inline bytes").toString("base64") }, 1) +
          line("artifact.created", { artifact_type: "file", artifact_id: "art_someupload" }, 2),
      );
      await new Promise((r) => setTimeout(r, 300));
      res.write(line("message.completed", { message: { role: "assistant", content: "done" } }, 3) + line("run.completed", { finish_reason: "stop" }, 4));
      res.end();
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "rv-inline-check" });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

const unnamedBlobs = async () => {
  const named = new Set((await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).map((r) => r.r2_key));
  return (await host.r2Keys("artifacts/")).filter((k) => !named.has(k));
};

describe("an inline artifact whose batch fails before its row is written", () => {
  it("leaves no blob in R2 that no row names, and no transcript item names the artifact", async () => {
    // The lookup of the referenced artifact (`... where "artifact"."artifact_id" in (?)`) is refused once.
    host.databaseOutage({ queries: 1, matching: 'from \\"artifact\\" where \\"artifact\\".\\"artifact_id\\" in' });
    const posted = await host.postEvent(messageEvent("rv-inline-check", "go"));
    const run = await host.waitForRun(posted.body.run_id!, 30_000);
    host.databaseOutage(false);
    const items = await host.query<{ artifact_refs_json: string | null }>("SELECT artifact_refs_json FROM transcript WHERE run_id = ?", [run.run_id]);
    const named: string[] = items.flatMap((i) => JSON.parse(i.artifact_refs_json ?? "[]").map((r: { artifact_id: string }) => r.artifact_id));
    const stored = new Set((await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact")).map((r) => r.artifact_id));
    // Neither a blob no row names (retention never finds it) nor a transcript item naming an artifact that has no row.
    expect({ unnamedBlobs: await unnamedBlobs(), namedButMissing: named.filter((id) => !stored.has(id)) }).toEqual({ unnamedBlobs: [], namedButMissing: [] });
  }, 60_000);
});
