import type { TestHost } from "./host";

/** An SSE body as a model provider streams it: each chunk a `data:` frame (JSON, or as given: `[DONE]`). */
export const sseBody = (chunks: unknown[]) => chunks.map((c) => `data: ${typeof c === "string" ? c : JSON.stringify(c)}\n\n`).join("");

/**
 * Registers `models` (id → API key) as llm models of the provider at `baseUrl` (each asking for the model named as its
 * id), the scripted runner, and a global agent `agentId` of that runner granted them all: the set-up of a file testing
 * what a model's answers become on their way to a runner.
 */
export async function bindModelAgent(
  host: TestHost,
  runner: { register(host: TestHost): Promise<unknown>; runnerId(): string },
  opts: { agentId: string; baseUrl: string; models: Record<string, string> },
): Promise<void> {
  for (const [modelId, key] of Object.entries(opts.models)) {
    const res = await host.admin("POST", "/v1/admin/models", { model_id: modelId, name: modelId, kind: "llm", base_url: opts.baseUrl, api_key: key, model: modelId });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: opts.agentId, name: opts.agentId, runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { models: Object.keys(opts.models) },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
}
