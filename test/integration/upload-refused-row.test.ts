import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/** An upload whose artifact row the database refuses (it answered: nothing was written) does not keep its blob. */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "late-upload",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
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
