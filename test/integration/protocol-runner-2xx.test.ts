import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * PROTOCOL §3: "Any non-2xx status, a body that is not a stream of results, or a connection that closes without
 * run.completed/run.failed ends the run as failed (code: runner.protocol_error / runner.http_error /
 * runner.stream_closed)". A 2xx answer is not an HTTP error: one that carries no results at all closed without a
 * terminal result.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "twoxx",
    onRun({ body }, res) {
      const mode = body.context.input.text;
      if (mode === "204") res.writeHead(204).end();
      else res.writeHead(200, { "content-type": "application/x-ndjson" }).end();
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "twoxx" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a 2xx answer without results", () => {
  it("200 with an empty body ends runner.stream_closed", async () => {
    const ev = await host.postEvent(messageEvent("twoxx-200", "200"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.stream_closed"]);
  });

  it("204 No Content is a 2xx, not runner.http_error: it closed without a terminal result", async () => {
    const ev = await host.postEvent(messageEvent("twoxx-204", "204"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.stream_closed"]);
  });
});
