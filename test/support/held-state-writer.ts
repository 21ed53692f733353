import { afterAll, beforeAll, expect } from "vitest";
import { callHostApi, deferred } from "./host-api";
import { startTestHost, type TestHost } from "./host";
import { resultWriter, startAdHocRunner } from "./runner";

/**
 * A host with one runner service (`name`) whose runs hold until `release` resolves, then write conversation state
 * both ways (a `state.set` call, key `by.call`; a `state.updated` result, key `by.result`) and answer
 * `set: <the call's status>`: the set-up of the tests of an agent deleted while its run is in flight. `arrived`
 * resolves once a held run has reached the runner. With `holding`, only runs started with that text are held (the
 * others answer "plain" at once). Call it once at a file's top level: it registers the file's beforeAll and afterAll.
 */
export function useHeldStateWriter(name: string, opts: { holding?: string } = {}) {
  const arrived = deferred<void>();
  const release = deferred<void>();
  // Filled in by beforeAll: the tests read these fields only once it has run.
  const parts = {} as { host: TestHost; runner: Awaited<ReturnType<typeof startAdHocRunner>> };

  beforeAll(async () => {
    parts.runner = await startAdHocRunner({
      name,
      runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true } }],
      async onRun({ body }, res) {
        const ctx = body.context;
        const w = resultWriter(res, ctx.run_id);
        if (opts.holding !== undefined && ctx.input.text !== opts.holding) return w.reply("plain");
        arrived.resolve();
        await release.promise;
        const set = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "state.set", { scope: "conversation", key: "by.call", value: { n: 1 } });
        w.send("state.updated", { scope: "conversation", key: "by.result", value: { n: 2 } });
        w.reply(`set: ${set.status}`);
      },
    });
    parts.host = await startTestHost();
    expect((await parts.host.admin("POST", "/v1/admin/runner-services", { base_url: parts.runner.url })).status).toBe(201);
  });
  afterAll(async () => {
    release.resolve();
    await parts.host?.dispose();
    await parts.runner?.close();
  });

  return Object.assign(parts, { arrived, release });
}
