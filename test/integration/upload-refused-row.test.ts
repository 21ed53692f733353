import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A write the database refused leaves no blob behind: an upload whose artifact row is refused, and a result batch
 * whose artifact-reference lookup fails (it used to have put its inline blobs already, named by no row but by the
 * run's last transcript item).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "late-upload",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "inline then ref") {
        // One chunk (one write): an inline artifact and a reference to an uploaded one (whose lookup the database refuses).
        const line = (type: string, data: unknown, sequence: number) => `${JSON.stringify({ run_id: ctx.run_id, type, data, sequence })}\n`;
        res.write(
          line("artifact.created", { artifact_type: "file", name: "inline.txt", mime_type: "text/plain", content_base64: Buffer.from("inline bytes").toString("base64") }, 1) +
            line("artifact.created", { artifact_type: "file", artifact_id: "art_someupload" }, 2),
        );
        await new Promise((r) => setTimeout(r, 300));
        w.send("message.completed", { message: { role: "assistant", content: "done" } }, 3);
        w.send("run.completed", { finish_reason: "stop" }, 4);
        return void res.end();
      }
      const up = await uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, Buffer.from("upload bytes"), { name: "u.txt", mime_type: "text/plain" });
      w.reply(JSON.stringify({ status: up.status, code: up.body.error?.code }));
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "late-upload" });
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

describe("an upload whose artifact row the database refuses", () => {
  it("answers the retryable fault and leaves no blob behind (as a refused inline artifact or ingress attachment does)", async () => {
    host.databaseOutage({ queries: 1, matching: 'INSERT INTO \\"artifact\\"' });
    const posted = await host.postEvent(messageEvent("refused-upload", "upload"));
    const run = await host.waitForRun(posted.body.run_id!, 30_000);
    expect(JSON.parse(String(run.message?.content))).toEqual({ status: 500, code: "runtime_error" });
    expect(await host.query("SELECT 1 FROM artifact WHERE name = 'u.txt'")).toEqual([]);
    expect(await unnamedBlobs()).toEqual([]);
  });
});

describe("an inline artifact whose batch fails before its row is written", () => {
  it("leaves no blob in R2 that no row names, and no transcript item names the artifact", async () => {
    // The lookup of the referenced artifact (`... where "artifact"."artifact_id" in (?)`) is refused once.
    host.databaseOutage({ queries: 1, matching: 'from \\"artifact\\" where \\"artifact\\".\\"artifact_id\\" in' });
    const posted = await host.postEvent(messageEvent("refused-lookup", "inline then ref"));
    const run = await host.waitForRun(posted.body.run_id!, 30_000);
    host.databaseOutage(false);
    const items = await host.query<{ artifact_refs_json: string | null }>("SELECT artifact_refs_json FROM transcript WHERE run_id = ?", [run.run_id]);
    const named: string[] = items.flatMap((i) => JSON.parse(i.artifact_refs_json ?? "[]").map((r: { artifact_id: string }) => r.artifact_id));
    const stored = new Set((await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact")).map((r) => r.artifact_id));
    // Neither a blob no row names (retention never finds it) nor a transcript item naming an artifact that has no row.
    expect({ unnamedBlobs: await unnamedBlobs(), namedButMissing: named.filter((id) => !stored.has(id)) }).toEqual({ unnamedBlobs: [], namedButMissing: [] });
  }, 60_000);
});
