import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uploadArtifact } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * README "Artifacts": the run's upload budget counts what uploads store ("a chunked body ... gives back what it did
 * not store"). A sized upload whose client went away mid-body stored nothing (no row, no blob), so it must not keep
 * its declared length charged: a runner that retries an upload broken off by the network would otherwise find its
 * run's ARTIFACT_UPLOAD_RUN_MAX_BYTES spent on bytes that were never kept.
 */
const KiB = 1024;
const UPLOAD_MAX = 64 * KiB;
const RUN_MAX = 128 * KiB;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

/** A PUT declaring `declared` bytes that sends only `first` of them, then drops the connection. */
function brokenOffUpload(base: string, runId: string, token: string, declared: number, first: number) {
  const { hostname, port } = new URL(base);
  return new Promise<void>((resolve) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(`PUT /v1/runs/${runId}/artifacts?name=broken.bin HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${declared}\r\n\r\n`);
      socket.write(Buffer.alloc(first, 1));
      setTimeout(() => (socket.destroy(), resolve()), 100);
    });
    socket.on("error", () => resolve());
  });
}

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "budget", runners: [{ name: "default", label: { en_US: "budget" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }] });
  host = await startTestHost({ vars: { ARTIFACT_UPLOAD_MAX_BYTES: String(UPLOAD_MAX), ARTIFACT_UPLOAD_RUN_MAX_BYTES: String(RUN_MAX) } });
  await runner.register(host);
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "budget" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a sized upload broken off mid-body", () => {
  it("stores nothing and gives its declared length back to the run's budget", async () => {
    const { result, runId } = await runner.run(host, "budget-broken", async (_api, ctx) => {
      const { base_url: base, token } = ctx.runtime.api;
      // Three tries of a 60 KiB upload, each broken off after 1000 bytes: 180 KiB declared, nothing stored.
      for (let i = 0; i < 3; i++) await brokenOffUpload(base, ctx.run_id, token, 60 * KiB, 1000);
      // The fourth try arrives whole. The host may take a moment to see the last connection go: a few attempts.
      let last: Awaited<ReturnType<typeof uploadArtifact>> | undefined;
      for (let attempt = 0; attempt < 20; attempt++) {
        last = await uploadArtifact(base, ctx.run_id, token, new Uint8Array(60 * KiB), { name: "whole.bin" });
        if (last.status !== 413) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      return { status: last!.status, error: last!.body.error?.message ?? null };
    });
    expect(result).toEqual({ status: 200, error: null });
    const rows = await host.query<{ name: string; size_bytes: number }>("SELECT name, size_bytes FROM artifact WHERE run_id = ?", [runId]);
    expect(rows).toEqual([{ name: "whole.bin", size_bytes: 60 * KiB }]);
  });
});
