import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";
import { uploadArtifact } from "../support/host-api";

/**
 * README "History, state and storage": "A count or size over the host's cap (`limit`, `top_k`, an `artifact.read`
 * `length`) is taken as the cap, as LangBot's host takes it, and the answer says whether more is left (`has_more`);
 * one under 1 is a 400." LangBot's host caps with `min(limit, 100)`, whatever the integer. Runners written in Python
 * or Go commonly ask for "everything" with `sys.maxsize` / `math.MaxInt64` (9223372036854775807), which is a valid
 * JSON integer over the cap: it must be capped, not refused.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

const MAX_INT64 = "9223372036854775807";

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "huge-counts",
    runners: [{ name: "default", label: { en_US: "huge" }, capabilities: {}, permissions: { history: ["page", "search"], events: ["page"], artifacts: ["metadata", "read"] } }],
  });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "huge", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a count over the host's cap sent as a 64-bit maximum", () => {
  it("is taken as the cap by history.page, event.page, history.search and state.list, not refused", async () => {
    const C = "huge-1";
    await host.waitForRun((await host.postEvent(messageEvent(C, "hello world"))).body.run_id!);
    const { result } = await runner.run(host, C, async (_api, ctx) => {
      // The body as a Python runner's json.dumps({"limit": sys.maxsize}) writes it.
      const call = async (action: string, params: string) => {
        const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, {
          method: "POST",
          headers: { authorization: `Bearer ${ctx.runtime.api.token}`, "content-type": "application/json" },
          body: `{"action":"${action}","params":${params}}`,
        });
        const body = (await res.json()) as any;
        return { status: res.status, code: body.error?.code ?? null };
      };
      return {
        history: await call("history.page", `{"limit":${MAX_INT64}}`),
        events: await call("event.page", `{"limit":${MAX_INT64}}`),
        search: await call("history.search", `{"query":"hello","top_k":${MAX_INT64}}`),
        state: await call("state.list", `{"scope":"conversation","limit":${MAX_INT64}}`),
      };
    });
    const ok = { status: 200, code: null };
    expect(result).toEqual({ history: ok, events: ok, search: ok, state: ok });
  });

  it("is taken as the cap by artifact.read's length (the rest of the artifact), not refused", async () => {
    const { result } = await runner.run(host, "huge-2", async (_api, ctx) => {
      const up = await uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, new TextEncoder().encode("hello world"), { name: "a.txt", mime_type: "text/plain" });
      const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.runtime.api.token}`, "content-type": "application/json" },
        body: `{"action":"artifact.read","params":{"artifact_id":"${up.body.data.artifact_id}","offset":6,"length":${MAX_INT64}}}`,
      });
      const body = (await res.json()) as any;
      return { status: res.status, code: body.error?.code ?? null, content: body.data ? Buffer.from(body.data.content_base64, "base64").toString() : null };
    });
    expect(result).toEqual({ status: 200, code: null, content: "world" });
  });
});
