import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAM_ENDLESS, startFakeProvider } from "../support/fake-provider";
import { startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { putAgent, runLedger, startScriptedRunner } from "../support/scripted-runner";
import { MAX_FOLLOWERS_PER_RUN } from "../../src/run/live";

/**
 * A stream the conversation's object answers with (a run's follower, a `model.stream`) crosses an RPC pipe to the
 * Worker; when its reader leaves, the Worker sees its request go and has the object end the stream. Ended, not
 * errored: workerd reports an error of a stream its RPC pipe reads as an uncaught exception of the object (in
 * production, an exception on its invocation for each reader that leaves). workerd logs those only with
 * `--verbose`, which this host runs with, so the log is where the test looks.
 */
const KEEPALIVE_MS = 100;
const KEY = "sk-reader-gone-4f2a9c";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

beforeAll(async () => {
  provider = await startFakeProvider({ keys: { "gpt-main": KEY } });
  runner = await startScriptedRunner({
    name: "reader-gone",
    runners: [{ name: "default", label: { en_US: "reader-gone" }, capabilities: { streaming: true }, permissions: { models: ["stream"] } }],
  });
  host = await startTestHost({ captureLogs: true, verbose: true, vars: { RUN_STREAM_KEEPALIVE_MS: String(KEEPALIVE_MS) } });
  await runner.register(host);
  expect((await host.admin("POST", "/v1/admin/models", { model_id: "chat", name: "chat", kind: "llm", base_url: provider.baseUrl, api_key: KEY, model: "gpt-main" })).status).toBe(201);
  await putAgent(host, { agent_id: "reader-gone", runner_id: runner.runnerId(), resource_policy: { models: ["chat"] } });
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

/** What workerd reported as uncaught (its `--verbose` lines) since the log had `from` characters. */
const uncaughtSince = (from: number) =>
  host
    .logs()
    .slice(from)
    .split("\n")
    .filter((line) => line.includes("uncaught exception"));

describe("a reader that leaves a stream answered through the conversation's object", () => {
  it("a run's follower: it is dropped on the next keep-alive, and workerd reports nothing uncaught", async () => {
    const logged = host.logs().length;
    const release = deferred();
    const started = deferred<string>();
    const done = runner.run(host, "reader-gone-follow", async (_api, ctx) => {
      started.resolve(ctx.run_id);
      await release.promise;
      return "ok";
    });
    const runId = await started.promise;
    const follow = () => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth() });
    // Every slot taken by a reader that leaves once it has had a keep-alive: one written to it each interval after.
    const statuses = await Promise.all(
      Array.from({ length: MAX_FOLLOWERS_PER_RUN }, async () => {
        const controller = new AbortController();
        const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth(), signal: controller.signal });
        await res.body!.getReader().read();
        controller.abort();
        return res.status;
      }),
    );
    expect(new Set(statuses)).toEqual(new Set([200]));
    // A slot freed: the Worker saw a request go and the object dropped its follower.
    let again = await follow();
    for (const until = Date.now() + 5_000; again.status === 429 && Date.now() < until; again = await follow()) {
      await again.body?.cancel();
      await new Promise((r) => setTimeout(r, KEEPALIVE_MS));
    }
    expect(again.status).toBe(200);
    // The others' keep-alives come within an interval: time for each to be dropped.
    await new Promise((r) => setTimeout(r, 3 * KEEPALIVE_MS));
    release.resolve();
    await done;
    expect((await again.text()).trimEnd().split("\n").at(-1)).toBe('data: {"status":"completed"}');
    expect(uncaughtSince(logged)).toEqual([]);
  });

  it("a model stream: the provider call stops, the cancel is recorded, and workerd reports nothing uncaught", async () => {
    const logged = host.logs().length;
    const abandoned = provider.state.streamsAbandoned;
    const { runId } = await runner.run(host, "reader-gone-model", async (_api, _ctx, _emit, raw) => {
      const res = await raw("model.stream", { model_id: "chat", messages: [{ role: "user", content: STREAM_ENDLESS }] });
      const reader = res.body!.getReader();
      await reader.read();
      await reader.cancel();
      for (const until = Date.now() + 5_000; provider.state.streamsAbandoned === abandoned && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
      return "left";
    });
    expect(provider.state.streamsAbandoned - abandoned).toBe(1);
    expect((await runLedger(host, runId)).find((e) => e.type === "model.failed")?.data).toMatchObject({ operation: "stream", code: "cancelled" });
    expect(uncaughtSince(logged)).toEqual([]);
  });
});
