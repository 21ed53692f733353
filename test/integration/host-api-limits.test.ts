import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";
import { uploadArtifact } from "../support/host-api";

/**
 * PROTOCOL §8 gives history.page and event.page a `limit≤100`: a host hard cap. LangBot's v1 (whose semantics
 * PROTOCOL.md says it follows "so that a LangBot runner author recognises everything") applies that cap as
 * `limit = min(limit, 100)` in both page_transcript and page_events, and its context document calls it
 * "limit 有 host hard cap". A runner asking for more than the cap should get a capped page, not an error, also
 * when it asks for "everything" with its language's largest integer (Python's sys.maxsize, Go's math.MaxInt64:
 * 9223372036854775807, a valid JSON number beyond 2^53).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "limits",
    runners: [{ name: "default", label: { en_US: "clamp" }, capabilities: {}, permissions: { history: ["page", "search"], events: ["page"], artifacts: ["metadata", "read"] } }],
  });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "clamp", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a page limit over the host's hard cap", () => {
  it("is capped at 100 by history.page and event.page, not refused", async () => {
    const C = "clamp-1";
    for (const text of ["one", "two"]) await host.waitForRun((await host.postEvent(messageEvent(C, text))).body.run_id!);
    const { result } = await runner.run(host, C, async (api) => {
      const answer = async (action: string, params: Record<string, unknown>) => {
        const res = await api(action, params);
        return { status: res.status, code: res.body.error?.code ?? null, items: res.body.data?.items?.length ?? null };
      };
      return { history: await answer("history.page", { limit: 200 }), events: await answer("event.page", { limit: 200 }) };
    });
    // two messages and their replies, then this run's own message / three events
    expect(result).toEqual({ history: { status: 200, code: null, items: 5 }, events: { status: 200, code: null, items: 3 } });
  });
});

const MAX_INT64 = "9223372036854775807";

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
