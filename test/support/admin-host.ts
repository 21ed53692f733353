import { afterAll, beforeAll, expect } from "vitest";
import { startTestHost, type TestHost } from "./host";
import { resultWriter, startAdHocRunner } from "./runner";

/**
 * The set-up the admin*.test.ts files share: a host with one registered runner service of three runners (alpha, whose
 * api_key is a required secret; beta; broken, which asks for a capability no host has), each answering with its own
 * name and its agent's. Call it once at a file's top level: it registers the file's beforeAll and afterAll.
 */
export function useAdminHost() {
  let host: TestHost;
  let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

  const perms = { history: ["page"] };
  beforeAll(async () => {
    runner = await startAdHocRunner({
      name: "multi",
      runners: [
        { name: "alpha", label: { en_US: "Alpha" }, permissions: perms, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" }, required: true }] },
        { name: "beta", label: { en_US: "Beta" }, permissions: perms },
        { name: "broken", label: { en_US: "Broken" }, capabilities: { telepathy: true } },
      ],
      // Each runner answers with its own name and the agent that bound it (and the api_key it was given, if any).
      onRun({ body }, res) {
        const key = body.context.config.api_key ? ` with ${body.context.config.api_key}` : "";
        resultWriter(res, body.context.run_id).reply(`${body.runner_name} for ${body.context.metadata.agent_id}${key}`);
      },
    });
    host = await startTestHost();
    const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url, secret: "a-shared-secret-0123456789" });
    expect(reg.status).toBe(201);
  });
  afterAll(async () => {
    await host?.dispose();
    await runner?.close();
  });

  const agent = (id: string, runnerName: string, scope: Record<string, string>, extra: Record<string, unknown> = {}) => ({
    agent_id: id,
    name: id,
    runner_id: runner.runnerId(runnerName),
    event_types: ["message.received"],
    scope,
    ...extra,
  });

  return {
    get host() {
      return host;
    },
    get runner() {
      return runner;
    },
    perms, agent,
  };
}
export type AdminHost = ReturnType<typeof useAdminHost>;
