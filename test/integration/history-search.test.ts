import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { deniedCalls, putAgent, startScriptedRunner } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let conversations = 0;

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "searcher",
    runners: [{ name: "default", label: { en_US: "searcher" }, capabilities: {}, permissions: { history: ["page", "search"], events: ["get"] } }],
  });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "searcher", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/**
 * A fresh conversation with history to search: user items (each answered by
 * an assistant echo), an unbound api.invoked item, and a neighbour
 * conversation saying the same words. Each test has its own, so no test sees
 * another's runs.
 */
async function seededConversation(): Promise<string> {
  const id = `search-${++conversations}`;
  for (const text of ["the invoice for March is attached", "what is the weather like", "March invoice overdue, invoice unpaid"]) {
    const posted = await host.postEvent(messageEvent(id, text));
    await host.waitForRun(posted.body.run_id!);
  }
  await host.postEvent({ ...messageEvent(id, "invoice raised through the api"), event_type: "api.invoked" });
  await host.postEvent({ ...messageEvent(`${id}-elsewhere`, "an invoice of another conversation"), event_type: "api.invoked" });
  return id;
}

describe("history.search", () => {
  it("finds the run's own transcript items by full text, best match first, with scores and a total", async () => {
    const CONVERSATION = await seededConversation();
    const { result } = await runner.run(host, CONVERSATION, (api) => api("history.search", { query: "invoice March" }));
    expect(result.status).toBe(200);
    const data = result.body.data;
    expect(data.query).toBe("invoice March");
    expect(data.items[0]).toMatchObject({ role: "user", content: "March invoice overdue, invoice unpaid", conversation_id: CONVERSATION });
    expect(data.items[0].cursor).toEqual(expect.any(String));
    const scores = data.items.map((i: any) => i.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    // Users' items, their echoes and the api item; never the other conversation's.
    expect(data.total_count).toBe(5);
    expect(data.items.map((i: any) => i.content)).not.toContain("an invoice of another conversation");
    expect(data.items[0].score).toBeGreaterThan(data.items[data.items.length - 1].score);
  });

  it("filters by role, by event type and by the run's own conversation id, and caps at top_k", async () => {
    const CONVERSATION = await seededConversation();
    const { result } = await runner.run(host, CONVERSATION, async (api) => ({
      assistant: await api("history.search", { query: "invoice", filters: { roles: ["assistant"] } }),
      api_events: await api("history.search", { query: "invoice", filters: { event_types: ["api.invoked"] } }),
      own: await api("history.search", { query: "weather", filters: { conversation_id: CONVERSATION, roles: ["user"], event_types: ["message.received"] } }),
      top_1: await api("history.search", { query: "invoice", top_k: 1 }),
      // Above the host's cap it is capped, as LangBot caps it; under 1 is refused.
      too_many: await api("history.search", { query: "invoice", top_k: 51 }),
      none: await api("history.search", { query: "invoice", top_k: 0 }),
    }));
    expect(result.assistant.body.data.items.map((i: any) => i.content).sort()).toEqual([
      "echo: March invoice overdue, invoice unpaid",
      "echo: the invoice for March is attached",
    ]);
    expect(result.api_events.body.data.items.map((i: any) => i.content)).toEqual(["invoice raised through the api"]);
    expect(result.own.body.data.items.map((i: any) => i.content)).toEqual(["what is the weather like"]);
    expect(result.top_1.body.data.items).toHaveLength(1);
    expect(result.top_1.body.data.total_count).toBe(5);
    expect([result.too_many.status, result.too_many.body.data.items.length]).toEqual([200, 5]);
    expect([result.none.status, result.none.body.error.code]).toEqual([400, "invalid_argument"]);
  });

  it("finds a Chinese or Japanese word inside a sentence written without spaces", async () => {
    const id = `search-${++conversations}`;
    for (const text of ["我明天要去北京开会", "東京で会議があります"]) await host.waitForRun((await host.postEvent(messageEvent(id, text))).body.run_id!);
    const { result } = await runner.run(host, id, async (api) => ({
      beijing: await api("history.search", { query: "北京", filters: { roles: ["user"] } }),
      meeting: await api("history.search", { query: "会議", filters: { roles: ["user"] } }),
      reversed: await api("history.search", { query: "京北" }),
    }));
    expect(result.beijing.body.data.items.map((i: any) => i.content)).toEqual(["我明天要去北京开会"]);
    expect(result.meeting.body.data.items.map((i: any) => i.content)).toEqual(["東京で会議があります"]);
    expect(result.reversed.body.data.total_count).toBe(0);
  });

  it("finds a user message sent as content parts without input.text, and history reads its text", async () => {
    const id = `search-${++conversations}`;
    const contents = [
      { type: "text", text: "the quarterly " },
      { type: "text", text: "budget review" },
    ];
    const posted = await host.postEvent({ ...messageEvent(id, ""), input: { contents } });
    await host.waitForRun(posted.body.run_id!);
    const { result } = await runner.run(host, id, async (api) => ({
      search: await api("history.search", { query: "budget", filters: { roles: ["user"] } }),
      page: await api("history.page", { limit: 5 }),
      event: await api("event.get", { event_id: posted.body.event_id }),
    }));
    expect(result.search.body.data.items.map((i: any) => i.content)).toEqual(["the quarterly budget review"]);
    const item = result.page.body.data.items.find((i: any) => i.event_id === posted.body.event_id && i.role === "user");
    expect(item).toMatchObject({ role: "user", content: "the quarterly budget review", content_json: contents });
    expect(result.event.body).toMatchObject({ ok: true, data: { input_summary: "the quarterly budget review" } });
  });

  it("treats query text as words, never as FTS or SQL syntax", async () => {
    const CONVERSATION = await seededConversation();
    const hostile = ['"', "AND", "NEAR(invoice", '"invoice', "content:invoice", "invoice*", "^March", "'; DROP TABLE transcript; --", "a\u0000b", "()", "🙂"];
    const { result } = await runner.run(host, CONVERSATION, async (api) => {
      const out: Record<string, unknown> = {};
      for (const query of hostile) out[query] = await api("history.search", { query });
      return out;
    });
    for (const query of hostile) expect(result[query], query).toMatchObject({ status: 200, body: { ok: true, data: { query } } });
    // Quotes and operators are dropped by the tokenizer: the word itself still matches.
    expect(result['"invoice'].body.data.total_count).toBe(5);
    expect(result["invoice*"].body.data.total_count).toBe(5);
  });

  it("refuses another conversation with 403 and audits it", async () => {
    const CONVERSATION = await seededConversation();
    const { result, runId } = await runner.run(host, CONVERSATION, (api) =>
      api("history.search", { query: "invoice", filters: { conversation_id: `${CONVERSATION}-elsewhere` } }),
    );
    expect([result.status, result.body.error.code]).toEqual([403, "unauthorized"]);
    expect(await deniedCalls(host, runId)).toEqual([
      expect.objectContaining({
        run_id: runId,
        runner_id: runner.runnerId(),
        action: "history.search",
        resource: { conversation_id: `${CONVERSATION}-elsewhere` },
        scope: { conversation_id: CONVERSATION, thread_id: null },
      }),
    ]);
  });
});
