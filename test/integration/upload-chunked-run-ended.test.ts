/**
 * A chunked upload (no Content-Length) whose run ends while its body is still arriving: once the body outgrows what
 * the upload reserved, the run's budget is asked for more, the run is over, and the upload is refused 401 with
 * nothing kept. The client may still be sending then: the rest is read and discarded first (bounded as every refusal
 * is: lib/drain.ts), so it reads the 401, not a connection reset.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { chunkedInParts, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

const KiB = 1024;
/** ARTIFACT_UPLOAD_RUN_MAX_BYTES of this host: a chunked upload reserves all of it at first, and asks for more past it. */
const RUN_UPLOAD_MAX = 256 * KiB;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const acrossCancel = { midUpload: deferred<string>(), cancelled: deferred(), answer: deferred<Awaited<ReturnType<typeof chunkedInParts>>>() };

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "chunked-run-ended",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const url = `${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=late.bin`;
      // Within the reservation; then, the run cancelled, past it; then, a moment later, the end of the body.
      const answer = await chunkedInParts(url, ctx.runtime.api.token, [
        { bytes: 64 * KiB },
        {
          bytes: RUN_UPLOAD_MAX,
          before: async () => {
            acrossCancel.midUpload.resolve(ctx.run_id);
            await acrossCancel.cancelled.promise;
          },
        },
        { bytes: 64 * KiB, before: () => new Promise((r) => setTimeout(r, 300)) },
      ]);
      acrossCancel.answer.resolve(answer);
      res.end();
    },
  });
  host = await startTestHost({ captureLogs: true, vars: { ARTIFACT_UPLOAD_RUN_MAX_BYTES: String(RUN_UPLOAD_MAX) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "chunked-run-ended" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

it("a chunked upload outgrowing its reservation after its run ended: the rest is read first, so the client reads the 401, not a reset", async () => {
  const blobsBefore = await host.r2Keys("artifacts/");
  await host.postEvent(messageEvent("chunked-cancel", "upload"));
  const runId = await acrossCancel.midUpload.promise;
  // Admitted before its run is cancelled (else it is refused up front, its whole body drained, and this shows nothing).
  await expect.poll(() => host.decisions(runId).filter((d) => d.action === "artifact.upload").map((d) => [d.outcome, d.status])).toEqual([["allowed", 200]]);
  expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
  expect((await host.waitForRun(runId)).status).toBe("cancelled");
  acrossCancel.cancelled.resolve();
  expect(await acrossCancel.answer.promise).toEqual({ answeredEarly: false, status: 401 });
  expect(await host.query("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId])).toEqual([]);
  expect((await host.r2Keys("artifacts/")).filter((k) => !blobsBefore.includes(k))).toEqual([]);
});
