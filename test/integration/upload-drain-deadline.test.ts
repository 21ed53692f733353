/**
 * An upload refused while its client is still sending (R2 failed it, its chunked body outgrew what it may take, its run
 * ended) has the rest of its body read and discarded before the answer (lib/drain.ts). That drain is a courtesy to the
 * client: the run's deadline passing during it cuts it, but leaves the answer the upload had earned (500, 413, 401),
 * never turning it into a 408 `deadline_exceeded`. Each client holds its last bytes until it has its answer, so the
 * deadline always passes mid-drain. The three run at once: each waits out the same deadline.
 */
import { afterAll, beforeAll, describe, it } from "vitest";
import { chunkedInParts, deferred, stalledBody } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

const KiB = 1024;
const DEADLINE_MS = 2_000;
/** lib/drain.ts's DRAIN_MAX_MS: a drain ended sooner than this after its upload began was cut by the deadline. */
const DRAIN_MAX_MS = 5_000;
/** ARTIFACT_UPLOAD_MAX_BYTES: a chunked upload reserves this much at first, and is refused (413) past it. */
const UPLOAD_MAX = 256 * KiB;

/** What the client got (answered before it sent its last bytes; the status, or how the connection failed), and when. */
type Answer = { outcome: { answered: boolean; status?: number; error?: string }; afterMs: number };
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const answers = { storage: deferred<Answer>(), tooLarge: deferred<Answer>(), runEnded: deferred<Answer>() };
/** The run-ended case: its run id once its upload is under way, and the go-ahead once that run is cancelled. */
const acrossCancel = { midUpload: deferred<string>(), cancelled: deferred() };

/**
 * Held until `answered` settles (the client has its answer), or past the drain's own bound should it never: the
 * client never sends its last bytes before the host has answered, whenever the deadline passes.
 */
const untilAnswered = (answered: Promise<unknown>) => Promise.race([answered, new Promise((r) => setTimeout(r, DRAIN_MAX_MS + 3_000))]);

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "upload-drain-deadline",
    runners: [{ name: "default", label: { en_US: "x" }, capabilities: {}, permissions: { artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const text: string = ctx.input.text;
      const url = `${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/artifacts?name=held.bin`;
      const token: string = ctx.runtime.api.token;
      const started = Date.now();
      const answered = deferred();
      const report = (into: ReturnType<typeof deferred<Answer>>) => (outcome: Answer["outcome"]) => {
        answered.resolve();
        into.resolve({ outcome, afterMs: Date.now() - started });
      };
      if (text === "storage") {
        // A sized body whose put R2 fails at once: the rest is drained while the client holds it.
        void stalledBody(url, { method: "PUT", token, declared: 128 * KiB, first: 16 * KiB, pauseMs: 0, duringPause: () => untilAnswered(answered.promise) }).then((a) =>
          report(answers.storage)({ answered: a.answeredDuringPause, status: a.status, error: a.error }),
        );
      }
      if (text === "too large") {
        // A chunked body past ARTIFACT_UPLOAD_MAX_BYTES: refused, and up to 1 MiB more drained while the client holds its last part.
        void chunkedInParts(url, token, [{ bytes: 64 * KiB }, { bytes: UPLOAD_MAX }, { bytes: 64 * KiB, before: () => untilAnswered(answered.promise) }]).then((a) =>
          report(answers.tooLarge)({ answered: a.answeredEarly, status: a.status, error: a.error }),
        );
      }
      if (text === "run ended") {
        // Admitted, then its run cancelled, then past its reservation: refused 401, the rest drained while held.
        const parts = [
          { bytes: 64 * KiB },
          {
            bytes: UPLOAD_MAX,
            before: async () => {
              acrossCancel.midUpload.resolve(ctx.run_id);
              await acrossCancel.cancelled.promise;
            },
          },
          { bytes: 64 * KiB, before: () => untilAnswered(answered.promise) },
        ];
        void chunkedInParts(url, token, parts).then((a) => report(answers.runEnded)({ answered: a.answeredEarly, status: a.status, error: a.error }));
      }
      await answered.promise;
      res.end();
    },
  });
  host = await startTestHost({ captureLogs: true, storageDrill: true, vars: { RUN_DEADLINE_MS: String(DEADLINE_MS), ARTIFACT_UPLOAD_MAX_BYTES: String(UPLOAD_MAX) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "upload-drain-deadline" });
});
afterAll(async () => {
  host?.storageFailure(false);
  await host?.dispose();
  await runner?.close();
});

const nothingStored = async (runId: string) => host.query("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);

describe.concurrent("an upload whose run's deadline passes while its refused body is drained", () => {
  it("R2 failed its put: the retryable 500 stands", async ({ expect }) => {
    // The only put made in this file: the other uploads are refused before their body ends.
    host.storageFailure({ op: "put", key: "artifacts/" });
    const posted = await host.postEvent(messageEvent("drain-deadline-storage", "storage"));
    const answer = await answers.storage.promise;
    expect(answer.outcome).toEqual({ answered: true, status: 500 });
    expect(answer.afterMs).toBeLessThan(DRAIN_MAX_MS);
    expect((await host.waitForRun(posted.body.run_id!)).status).toBe("timeout");
    expect(await nothingStored(posted.body.run_id!)).toEqual([]);
  });

  it("a chunked body past ARTIFACT_UPLOAD_MAX_BYTES: the 413 stands", async ({ expect }) => {
    const posted = await host.postEvent(messageEvent("drain-deadline-too-large", "too large"));
    const answer = await answers.tooLarge.promise;
    expect(answer.outcome).toEqual({ answered: true, status: 413 });
    expect(answer.afterMs).toBeLessThan(DRAIN_MAX_MS);
    expect((await host.waitForRun(posted.body.run_id!)).status).toBe("timeout");
    expect(await nothingStored(posted.body.run_id!)).toEqual([]);
  });

  it("a chunked body outgrowing its reservation after its run ended: the 401 stands", async ({ expect }) => {
    await host.postEvent(messageEvent("drain-deadline-run-ended", "run ended"));
    const runId = await acrossCancel.midUpload.promise;
    // Admitted before its run is cancelled (else refused up front, which shows nothing here).
    await expect.poll(() => host.decisions(runId).filter((d) => d.action === "artifact.upload").map((d) => [d.outcome, d.status])).toEqual([["allowed", 200]]);
    expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await host.waitForRun(runId)).status).toBe("cancelled");
    acrossCancel.cancelled.resolve();
    const answer = await answers.runEnded.promise;
    expect(answer.outcome).toEqual({ answered: true, status: 401 });
    expect(answer.afterMs).toBeLessThan(DRAIN_MAX_MS);
    expect(await nothingStored(runId)).toEqual([]);
  });
});
