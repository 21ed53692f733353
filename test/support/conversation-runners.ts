import type { ServerResponse } from "node:http";
import { expect } from "vitest";
import { callHostApi, deferred } from "./host-api";
import { startTestHost, type TestHost } from "./host";
import { putAgent } from "./scripted-runner";
import { resultWriter, startAdHocRunner, type RunCall } from "./runner";

/**
 * The set-up of the concurrency tests (PROTOCOL §10): a host with a steering runner and a plain one, runs that
 * stay busy until the test opens their conversation's gate, and an agent per conversation.
 */
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;

/** One run as its runner sees it: context, result writer, conversation, text, and its Host API. */
export function runOf({ body }: RunCall, res: ServerResponse) {
  const ctx = body.context;
  return {
    ctx,
    w: resultWriter(res, ctx.run_id),
    conversation: ctx.conversation.conversation_id as string,
    text: (ctx.input.text ?? "") as string,
    api: (action: string, params: Record<string, unknown> = {}) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params),
  };
}

export async function startSteererAndPlain(onRun: (call: RunCall, res: ServerResponse) => Promise<void>, runnersOf: (steering: boolean) => Record<string, unknown>[]) {
  const steerer = await startAdHocRunner({ name: "steerer", runners: runnersOf(true), onRun });
  const plain = await startAdHocRunner({ name: "plain", runners: runnersOf(false), onRun });
  const host: TestHost = await startTestHost();
  for (const r of [steerer, plain]) expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
  const gates = new Map<string, ReturnType<typeof deferred<void>>>();
  return {
    host,
    steerer,
    plain,
    /** A conversation's gate: its "hold" runs wait on it until the test resolves it. */
    gate(conversation: string) {
      if (!gates.has(conversation)) gates.set(conversation, deferred());
      return gates.get(conversation)!;
    },
    /** An agent bound to one conversation only, so each test has its own strategy; `pull` is its runner_config. */
    agentFor: (conversation: string, runner: Runner, opts: { concurrency?: Record<string, unknown>; pull?: "all" | "one" | "never" } = {}) =>
      putAgent(host, { agent_id: `agent-${conversation}`, name: conversation, runner_id: runner.runnerId(), runner_config: { pull: opts.pull ?? "never" }, scope: { type: "conversation", id: conversation }, concurrency: opts.concurrency ?? {} }),
    async dispose() {
      for (const g of gates.values()) g.resolve();
      await host.dispose();
      await Promise.all([steerer.close(), plain.close()]);
    },
  };
}
