import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inChunks, largeFile, uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

const MiB = 1024 * 1024;
const UPLOAD_MAX = 12 * MiB;
const RUN_UPLOAD_MAX = 64 * MiB;
/** The run's budget left after the uploads below that are stored before the refusals: 10 + 5 + 7 MiB + 3, 0, 12 MiB, 1 + 2, 12 + 12 + 3 MiB. */
const LEFT = 3 * MiB - 6;
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
      // A transport failure is an outcome too (status 0), never a crash of this runner.
      const upload = async (body: Uint8Array | ReadableStream<Uint8Array>, query: Record<string, string> = {}) => {
        try {
          return await uploadArtifact(base, ctx.run_id, token, body, query);
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
      // Two chunked uploads at once, then sized ones: what is left shows in the refusal of a last one.
      out.parallel = await Promise.all([upload(inChunks(largeFile(1))), upload(inChunks(largeFile(2)))]);
      out.sized = [(await upload(new Uint8Array(12 * MiB))).status, (await upload(new Uint8Array(12 * MiB))).status, (await upload(new Uint8Array(3 * MiB))).status];
      // Refused bodies small enough to be drained whole: the client always reads the 413.
      out.left = await upload(new Uint8Array(3 * MiB));
      out.over = await upload(zeros(LEFT + 512 * 1024), { name: "over.bin" });
      // Both refusals gave back what they held: the rest of the budget still fits, exactly.
      out.rest = await upload(zeros(LEFT), { name: "rest.bin" });
      out.none_left = await upload(inChunks(largeFile(1)), { name: "none.bin" });
      // Far larger than the drain bound: the host stops reading, so the client reads the 413 or, still writing, a reset.
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
  it("stores part-boundary sizes exactly, answers 413 to bodies past their reservation, and gives back what they held", async () => {
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
    expect(out.sized).toEqual([200, 200, 200]);
    expect(out.left).toMatchObject({ status: 413, body: { error: { code: "payload_too_large" } } });
    expect(out.left.body.error.message).toContain(`(${LEFT} of ${RUN_UPLOAD_MAX})`);
    expect(out.over).toMatchObject({ status: 413, body: { error: { code: "payload_too_large" } } });
    expect(out.rest).toMatchObject({ status: 200, body: { data: { size_bytes: LEFT } } });
    expect(out.none_left).toMatchObject({ status: 413, body: { error: { code: "payload_too_large" } } });
    expect(out.none_left.body.error.message).toContain("nothing is left");
    if (out.way_too_big.status !== 0) expect(out.way_too_big).toMatchObject({ status: 413, body: { error: { code: "payload_too_large" } } });
    // Whatever the client saw of it, the refused bodies left no row behind, and the run went on to complete.
    expect(run.status).toBe("completed");
    const names = (await host.query<{ name: string | null }>("SELECT name FROM artifact ORDER BY created_at")).map((r) => r.name);
    expect(names).toEqual(["ten.bin", "five.bin", "seven.bin", "zero.bin", "exact.bin", null, null, null, null, null, "rest.bin"]);
  }, 180_000);
});
