import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uploadArtifact } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * README "Artifacts": ARTIFACT_UPLOAD_MAX_BYTES (100 MiB) per upload and ARTIFACT_UPLOAD_RUN_MAX_BYTES (500 MiB) per
 * run, "both 413 beyond". A runner uploading a few small files at once, sent chunked (a stream body, no
 * Content-Length), stays far within both; none of them may be refused as over the run's budget.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

/** A few bytes, sent chunked, held open for `holdMs` so the uploads overlap on the host. */
function heldBody(bytes: Uint8Array, holdMs: number): ReadableStream<Uint8Array> {
  return new ReadableStream({
    async start(c) {
      c.enqueue(bytes);
      await new Promise((r) => setTimeout(r, holdMs));
      c.close();
    },
  });
}

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "concurrent", runners: [{ name: "default", label: { en_US: "concurrent" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }] });
  // The documented defaults: 100 MiB per upload, 500 MiB per run.
  host = await startTestHost();
  await runner.register(host);
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "concurrent" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("several chunked uploads at once", () => {
  it("are all stored when together they are far within the run's budget", async () => {
    const { result, runId } = await runner.run(host, "concurrent-chunked", async (_api, ctx) => {
      const { base_url: base, token } = ctx.runtime.api;
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => uploadArtifact(base, ctx.run_id, token, heldBody(new TextEncoder().encode(`file ${i}`), 500), { name: `f${i}.txt` })),
      );
      return answers.map((a) => [a.status, a.body.error?.message ?? null]);
    });
    expect(result).toEqual(Array.from({ length: 8 }, () => [200, null]));
    expect(await host.query("SELECT name FROM artifact WHERE run_id = ?", [runId])).toHaveLength(8);
  });
});
