import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inChunks, largeFile, uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

const MiB = 1024 * 1024;
const UPLOAD_MAX = 12 * MiB;
const RUN_UPLOAD_MAX = 64 * MiB;
/** A lazily generated body of `n` zero bytes. */
function zeros(n: number, chunk = 256 * 1024): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= n) return c.close();
      const k = Math.min(chunk, n - at);
      c.enqueue(new Uint8Array(k));
      at += k;
    },
  });
}

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "chunked",
    runners: [{ name: "default", label: { en_US: "chunked" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const base = ctx.runtime.api.base_url;
      const token = ctx.runtime.api.token;
      const upload = async (stream: ReadableStream<Uint8Array>, query: Record<string, string> = {}) => {
        try {
          return await uploadArtifact(base, ctx.run_id, token, stream, query);
        } catch (err) {
          return { status: 0, error: String((err as Error)?.cause ?? err) };
        }
      };
      const w = resultWriter(res, ctx.run_id);
      const out: Record<string, any> = {};
      out.ten = await upload(inChunks(largeFile(10 * MiB)), { name: "ten.bin" });
      out.five = await upload(inChunks(largeFile(5 * MiB)), { name: "five.bin" });
      out.seven = await upload(inChunks(largeFile(7 * MiB + 3)), { name: "seven.bin" });
      out.zero = await upload(inChunks(Buffer.alloc(0)), { name: "zero.bin" });
      out.exact = await upload(zeros(UPLOAD_MAX), { name: "exact.bin" });
      // Two chunked uploads at once, then two sized ones: what is left shows in the refusal of a last one.
      out.parallel = await Promise.all([upload(inChunks(largeFile(1))), upload(inChunks(largeFile(2)))]);
      const sized = (n: number) => uploadArtifact(base, ctx.run_id, token, new Uint8Array(n));
      out.sized1 = (await sized(12 * MiB)).status;
      out.sized2 = (await sized(12 * MiB)).status;
      out.left = await sized(8 * MiB);
      // Far larger than the reservation: the host stops reading, the client still reads a 413. Last, as the
      // connection it came on is not reused after a body left unread.
      out.way_too_big = await upload(zeros(40 * MiB), { name: "huge.bin" });
      return w.reply(JSON.stringify(out));
    },
  });
  host = await startTestHost({ vars: { ARTIFACT_UPLOAD_MAX_BYTES: String(UPLOAD_MAX), ARTIFACT_UPLOAD_RUN_MAX_BYTES: String(RUN_UPLOAD_MAX) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "chunked" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("artifact.upload without a Content-Length", () => {
  it("stores part-boundary sizes exactly and answers 413 to a body far past its reservation", async () => {
    const posted = await host.postEvent(messageEvent("chunked-main", "go"));
    const run = await host.waitForRun(posted.body.run_id!, 120_000);
    const out = JSON.parse(String(run.message?.content));
    for (const [key, n] of [["ten", 10 * MiB], ["five", 5 * MiB], ["seven", 7 * MiB + 3]] as const) {
      expect(out[key].status, key).toBe(200);
      expect(out[key].body.data, key).toMatchObject({ size_bytes: n, sha256: createHash("sha256").update(largeFile(n)).digest("hex") });
      expect(Buffer.from((await host.r2Object(`artifacts/${out[key].body.data.artifact_id}`))!).equals(largeFile(n)), key).toBe(true);
    }
    expect(out.zero.body.data).toMatchObject({ size_bytes: 0 });
    expect(out.exact.body.data).toMatchObject({ size_bytes: UPLOAD_MAX });
    expect(out.parallel.map((p: any) => p.status)).toEqual([200, 200]);
    expect([out.sized1, out.sized2]).toEqual([200, 200]);
    // 10 + 5 + 7 MiB + 3, 0, 12 MiB, 1 + 2, 12 + 12 MiB stored: 64 MiB - 58 MiB - 6 bytes left.
    expect(out.left.body.error?.message).toContain(`(${6 * MiB - 6} of ${RUN_UPLOAD_MAX})`);
    expect(out.way_too_big).toMatchObject({ status: 413, body: { error: { code: "payload_too_large" } } });
  }, 180_000);
});
