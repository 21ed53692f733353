import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { readSse, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";
import { MAX_FOLLOWERS_PER_RUN } from "../../src/run/live";

/**
 * `HEAD /v1/runs/{id}/stream` (curl -I, a link checker, a proxy probing the URL) reads no body, so nothing can ever
 * write to it or see its reader go away. It must not take one of the run's follower slots: 32 of them would lock every
 * real follower out of a live run (429) until the run ends.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "stream-head" });
  host = await startTestHost({ vars: { RUN_STREAM_KEEPALIVE_MS: "100" } });
  await runner.register(host);
  await putAgent(host, { agent_id: "stream-head", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

describe("HEAD of a run's stream", () => {
  it("answers without making a follower, so real followers of the live run are not refused", async () => {
    const release = deferred<void>();
    const started = deferred<string>();
    const done = runner.run(host, "stream-head-live", async (_api, ctx) => {
      started.resolve(ctx.run_id);
      await release.promise;
      return "finished";
    });
    const runId = await started.promise;
    try {
      for (let i = 0; i < MAX_FOLLOWERS_PER_RUN; i++) {
        const head = await fetch(`${host.url}/v1/runs/${runId}/stream`, { method: "HEAD", headers: auth() });
        expect(head.status).toBe(200);
        await head.arrayBuffer();
      }
      // Many keep-alive intervals: a follower whose request went away would have been dropped by now.
      await new Promise((r) => setTimeout(r, 1_000));
      const follower = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth() });
      expect(follower.status).toBe(200);
      release.resolve();
      const { end, frames } = await readSse(follower);
      expect(end).toBe("completed");
      expect(frames.at(-1)?.type).toBe("run.completed");
    } finally {
      release.resolve();
      await done;
    }
    // HEAD of a run that does not exist is still a 404.
    expect((await fetch(`${host.url}/v1/runs/run_unknown/stream`, { method: "HEAD", headers: auth() })).status).toBe(404);
  });
});
