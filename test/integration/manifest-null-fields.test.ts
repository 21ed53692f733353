import { afterAll, beforeAll, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * PROTOCOL §2: capabilities, permissions and config_schema of an AgentRunnerManifest; the host takes them as optional
 * (absent = none). A Python runner (pydantic `model_dump()`, the LangBot SDK style) sends an unset one as `null`, and the
 * protocol's own convention is that null means absent (src/protocol/common.ts), as it already is for `description` and
 * `metadata`. Such a runner must be registered, not skipped as invalid.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "pyrunner",
    runners: [
      {
        name: "default",
        label: { en_US: "py" },
        description: null,
        capabilities: { streaming: true, tool_calling: null, knowledge_retrieval: null, multimodal_input: null, skill_authoring: null, interrupt: null, steering: null },
        permissions: { models: null, tools: null, knowledge_bases: null, history: ["page"], events: null, artifacts: null, storage: null, files: null },
        config_schema: null,
        metadata: null,
      },
      { name: "bare", label: { en_US: "bare" }, capabilities: null, permissions: null, config_schema: null },
    ],
    async onRun({ body }, res) {
      resultWriter(res, body.context.run_id).reply(`history_page=${body.context.context.available_apis.history_page}`);
    },
  });
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

it("a manifest whose unset optional fields are null registers every runner, with null read as absent", async () => {
  const res = await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
  expect(res.status).toBe(201);
  expect({ skipped: res.body.skipped ?? [], runners: JSON.stringify(res.body).includes("http:tests/pyrunner/bare") }).toEqual({ skipped: [], runners: true });
  await host.admin("POST", "/v1/admin/agents", { agent_id: "py", name: "py", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "py-conv" } });
  const ev = await host.postEvent(messageEvent("py-conv", "hi"));
  const run = await host.waitForRun(ev.body.run_id!);
  expect([run.status, run.message?.content]).toEqual(["completed", "history_page=true"]);
});
