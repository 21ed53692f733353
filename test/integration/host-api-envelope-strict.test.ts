import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A Host API body is `{action, params}` (PROTOCOL §8), and params are strict: a misspelt parameter is a 400
 * (src/protocol/host-api.ts). A misspelt `params` member itself must be refused too, not taken as "no params":
 * otherwise the call silently runs with every default (the newest page instead of the one asked for; for
 * steering.pull, every queued message instead of one).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "envelope", runners: [{ name: "default", label: { en_US: "e" }, capabilities: {}, permissions: { history: ["page"], events: ["page"] } }] });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "envelope", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a Host API body with a misspelt params member", () => {
  it("is a 400 invalid_argument, as a misspelt parameter inside params is, not a call with every default", async () => {
    const { result } = await runner.run(host, "envelope-1", async (_api, ctx) => {
      const send = async (body: unknown) => {
        const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, {
          method: "POST",
          headers: { authorization: `Bearer ${ctx.runtime.api.token}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        const answer = (await res.json()) as { error?: { code: string } };
        return [res.status, answer.error?.code ?? null];
      };
      return {
        inside: await send({ action: "history.page", params: { befor_cursor: "x", limit: 1 } }),
        envelope: await send({ action: "history.page", parameters: { before_cursor: ctx.context.latest_cursor, limit: 1 } }),
        events: await send({ action: "event.page", param: { limit: 1 } }),
        // The well-formed call still works.
        ok: await send({ action: "history.page", params: { limit: 1 } }),
      };
    });
    expect(result).toEqual({ inside: [400, "invalid_argument"], envelope: [400, "invalid_argument"], events: [400, "invalid_argument"], ok: [200, null] });
  });
});
