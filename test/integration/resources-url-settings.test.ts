import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * What a runner gets back from host-held resources whose endpoint URL carries
 * ordinary, non-secret query parameters (a collection name, an API version), as
 * many retrieval services and Azure OpenAI require: not scrubbed as secrets.
 */

const KB_KEY = "kb-url-settings-key-0123456789abcdef";
const MODEL_KEY = "sk-url-settings-azure-0123456789abcdef";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let upstream: Awaited<ReturnType<typeof listenLoopback>>;
const seen: string[] = [];

beforeAll(async () => {
  upstream = await listenLoopback(async (req, res) => {
    await readBody(req);
    seen.push(req.url ?? "");
    if (req.url?.startsWith("/search")) {
      if (req.headers.authorization !== `Bearer ${KB_KEY}`) return sendJson(res, 401, { error: "bad key" });
      return sendJson(res, 200, { entries: [{ content: "Holidays are described in the employee handbook, section 2.", score: 0.9, metadata: { source: "handbook.pdf" } }] });
    }
    if (req.headers.authorization !== `Bearer ${MODEL_KEY}`) return sendJson(res, 401, { error: "bad key" });
    return sendJson(res, 200, { choices: [{ message: { role: "assistant", content: "Azure API version 2024-10-21 went GA on 2024-10-21." }, finish_reason: "stop" }] });
  });
  runner = await startScriptedRunner({
    name: "url-settings-kb",
    runners: [{ name: "default", label: { en_US: "url-settings-kb" }, permissions: { models: ["invoke"], knowledge_bases: ["retrieve"] } }],
  });
  host = await startTestHost({});
  const register = async (path: string, payload: unknown) => {
    const res = await host.admin("POST", path, payload);
    if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  await register("/v1/admin/knowledge-bases", { kb_id: "handbook", name: "Handbook", endpoint: `${upstream.url}/search?collection=handbook`, api_key: KB_KEY });
  await register("/v1/admin/models", {
    model_id: "azure", name: "azure", kind: "llm", base_url: `${upstream.url}/openai/deployments/gpt-4o?api-version=2024-10-21`, api_key: MODEL_KEY, model: "gpt-4o",
  });
  await register("/v1/admin/runner-services", { base_url: runner.url });
  await register("/v1/admin/agents", {
    agent_id: "kb", name: "kb", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { knowledge_bases: ["handbook"], models: ["azure"] },
  });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), upstream?.close()]);
});

describe("ordinary query parameters in endpoint URLs", () => {
  it("a retrieval endpoint's collection name is not scrubbed out of the passages it returns", async () => {
    const { result } = await runner.run(host, "kb", async (api) => (await api("knowledge.retrieve", { kb_id: "handbook", query: "holidays" })).body);
    expect(result.ok).toBe(true);
    expect(result.data.entries[0]).toEqual({ content: "Holidays are described in the employee handbook, section 2.", score: 0.9, metadata: { source: "handbook.pdf" } });
  });

  it("an Azure OpenAI api-version is not scrubbed out of the model's answer", async () => {
    const { result } = await runner.run(host, "azure", async (api) => (await api("model.invoke", { model_id: "azure", messages: [{ role: "user", content: "when?" }] })).body);
    expect(seen.some((u) => u === "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21")).toBe(true);
    expect(result.data.message.content).toBe("Azure API version 2024-10-21 went GA on 2024-10-21.");
  });
});
