import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * PROTOCOL §8 gives history.page and event.page a `limit≤100`: a host hard cap. LangBot's v1 (whose semantics
 * PROTOCOL.md says it follows "so that a LangBot runner author recognises everything") applies that cap as
 * `limit = min(limit, 100)` in both page_transcript and page_events, and its context document calls it
 * "limit 有 host hard cap". A runner asking for more than the cap should get a capped page, not an error.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "limits",
    runners: [{ name: "default", label: { en_US: "clamp" }, capabilities: {}, permissions: { history: ["page"], events: ["page"] } }],
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
