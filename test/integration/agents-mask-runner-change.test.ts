/**
 * README "HTTP API", agents: runner_config fields the schema types `secret` "are shown as `********`, and sent back so
 * they keep their stored value"; the mask itself must never become the value (src/agents/runner-config.ts). An agent
 * read with GET and sent back with another runner_id (one that does not type the field secret) must not be saved with
 * the literal mask as its config, silently losing the secret and handing the runner "********".
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "mask-move",
    runners: [
      { name: "locked", label: { en_US: "locked" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" } }] },
      { name: "open", label: { en_US: "open" }, config_schema: [{ name: "api_key", type: "string", label: { en_US: "Key" } }] },
    ],
    onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply(`key=${body.context.config.api_key}`),
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a secret runner_config field sent back masked with another runner_id", () => {
  it("is refused or keeps its value: the mask never becomes the config the runner gets", async () => {
    const created = await host.admin("POST", "/v1/admin/agents", {
      agent_id: "mask-move",
      name: "m",
      runner_id: runner.runnerId("locked"),
      runner_config: { api_key: "sk-original-0123456789" },
      event_types: ["message.received"],
      scope: { type: "conversation", id: "mask-move" },
    });
    expect(created.status).toBe(201);
    const shown = await host.admin("GET", "/v1/admin/agents/mask-move");
    expect(shown.body.runner_config).toEqual({ api_key: "********" });

    // The operator moves the agent to the other runner, sending back what GET showed.
    const moved = await host.admin("PUT", "/v1/admin/agents/mask-move", { ...shown.body, runner_id: runner.runnerId("open") });
    if (moved.status === 200) {
      const run = await host.postEvent(messageEvent("mask-move", "hi"));
      const reply = (await host.waitForRun(run.body.run_id!)).message?.content;
      expect(reply).not.toBe("key=********");
    } else {
      expect([moved.status, moved.body.error?.details]).toEqual([400, { masked: ["api_key"] }]);
      // Nothing changed: the agent still runs on its runner with its secret.
      const run = await host.postEvent(messageEvent("mask-move", "hi"));
      expect((await host.waitForRun(run.body.run_id!)).message?.content).toBe("key=sk-original-0123456789");
    }
  });
});
