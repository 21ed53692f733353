import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A wide (not deep) JSON array is ordinary input: 400,000 small numbers fit in an event's 1 MiB. The check for
 * 64-bit whole numbers JSON parsing rounded (README "HTTP API": event `data`, `metadata`, state values) must not
 * fail on it: a request is answered as README says (202, or a 400/413 naming the problem), never a 500
 * `internal`, and a Host API call never a retryable 500 a runner would repeat forever.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const wide = (n: number) => "[" + Array(n).fill("0").join(",") + "]";

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "wide-json" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "wide-json", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const post = async (path: string, text: string) => {
  const res = await fetch(`${host.url}${path}`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: text });
  const body = (await res.json()) as any;
  return { status: res.status, code: body.error?.code ?? null };
};

describe("a wide array in a value kept as sent", () => {
  it("in an event's data or actor.metadata is accepted (202), not a 500", async () => {
    const data = await post("/v1/events", `{"event_type":"message.received","conversation_id":"wide-a","actor":{"actor_type":"user","actor_id":"u"},"input":{"text":"x"},"data":{"samples":${wide(400_000)}}}`);
    const meta = await post("/v1/events", `{"event_type":"message.received","conversation_id":"wide-b","actor":{"actor_type":"user","actor_id":"u","metadata":{"samples":${wide(400_000)}}},"input":{"text":"x"}}`);
    expect({ data, meta }).toEqual({ data: { status: 202, code: null }, meta: { status: 202, code: null } });
  });

  it("in a state.set value is refused for its size as any value over 256 KiB, not a retryable 500", async () => {
    const { result } = await runner.run(host, "wide-state", async (_api, ctx) => {
      const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.runtime.api.token}` },
        body: `{"action":"state.set","params":{"scope":"conversation","key":"k","value":${wide(200_000)}}}`,
      });
      const body = (await res.json()) as any;
      return { status: res.status, retryable: body.error?.retryable };
    });
    expect(result.status).toBeGreaterThanOrEqual(400);
    expect(result.status).toBeLessThan(500);
    expect(result.retryable).toBe(false);
  });

  it("in a runner's state.updated result drops that result (PROTOCOL §7), never fails the run with host.internal_error", async () => {
    const { result } = await runner.run(host, "wide-result", async (_api, _ctx, emit) => {
      // About 300 KB on one line, well under the 1 MiB line limit; over the 256 KiB state value limit.
      emit("state.updated", { scope: "conversation", key: "k", value: Array(150_000).fill(0) });
      return "answered";
    });
    expect(result).toBe("answered");
  });
});
