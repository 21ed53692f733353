import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * A line that is not JSON fails its run with `runner.protocol_error`, and the error quotes the line's start. The
 * quote is the runner's text cut to size: cut inside a surrogate pair (an emoji), or holding a NUL, it cannot be
 * stored as a text column and read back as it was (README: "never stored altered"), so the run's error
 * (GET /v1/runs/{id}) would no longer be the `run.failed` its ledger and SSE stream show.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const lines: Record<string, string> = {
  emoji: `${"x".repeat(79)}\u{1F600} this line is not JSON`,
  nul: "oops\u0000 the rest of the runner's garbage line",
};

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "bad-lines",
    async onRun({ body }, res) {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(`${lines[body.context.input.text]}\n`);
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "bad-lines" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const lone = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

describe("a protocol error quoting the runner's line", () => {
  for (const which of Object.keys(lines)) {
    it(`reads back in GET /v1/runs/{id} as its ledger's run.failed has it (${which})`, async () => {
      const posted = await host.postEvent(messageEvent(`bad-line-${which}`, which));
      const run = await host.waitForRun(posted.body.run_id!);
      expect(run.error?.code).toBe("runner.protocol_error");
      const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items as { type: string; data: any }[];
      const failed = ledger.filter((e) => e.type === "run.failed").at(-1)!;
      expect(run.error).toEqual({ code: failed.data.code, message: failed.data.error });
      // Text any client can decode and show: no half of an emoji, no NUL.
      expect(run.error!.message).not.toMatch(lone);
      expect(run.error!.message).not.toContain("\u0000");
    });
  }
});
