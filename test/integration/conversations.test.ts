import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/** Operators read the facts the host keeps (EventLog, Transcript) over HTTP, not from the database. */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const where = { workspace_id: "w-facts", bot_id: "b-facts" };
const query = (extra: Record<string, string> = {}) => new URLSearchParams({ conversation_id: "facts", ...where, ...extra }).toString();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "facts",
    async onRun({ body }, res) {
      resultWriter(res, body.context.run_id).reply(`echo ${body.context.input.text}`);
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "facts" });
  for (const text of ["one", "two", "three"]) {
    const posted = await host.postEvent(messageEvent("facts", text, { ...where, event_id: `facts-${text}`, data: { n: text.length } }));
    await host.waitForRun(posted.body.run_id!);
  }
  // The same conversation id in a thread is another conversation.
  await host.waitForRun((await host.postEvent(messageEvent("facts", "threaded", { ...where, thread_id: "t1" }))).body.run_id!);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("operator reads of a conversation's facts", () => {
  it("pages the transcript newest first with opaque cursors, one conversation (thread) at a time", async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 4; page++) {
      const res = await host.admin("GET", `/v1/conversations/transcript?${query({ limit: "4", ...(cursor ? { cursor } : {}) })}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.items.map((i: any) => `${i.role}:${i.content}`));
      if (!res.body.has_more) break;
      cursor = res.body.next_cursor;
    }
    expect(seen).toEqual(["assistant:echo three", "user:three", "assistant:echo two", "user:two", "assistant:echo one", "user:one"]);
    const threaded = await host.admin("GET", `/v1/conversations/transcript?${query({ thread_id: "t1" })}`);
    expect(threaded.body.items.map((i: any) => i.content)).toEqual(["echo threaded", "threaded"]);
  });

  it("pages the EventLog with what the host decided for each event, and shows one event whole", async () => {
    const res = await host.admin("GET", `/v1/conversations/events?${query({ limit: "2" })}`);
    expect(res.body.items.map((e: any) => e.event_id)).toEqual(["facts-three", "facts-two"]);
    expect(res.body.has_more).toBe(true);
    const rest = await host.admin("GET", `/v1/conversations/events?${query({ cursor: res.body.next_cursor })}`);
    expect(rest.body.items.map((e: any) => e.event_id)).toEqual(["facts-one"]);
    expect(rest.body.has_more).toBe(false);

    const one = await host.admin("GET", "/v1/events/facts-one");
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ event_id: "facts-one", event_type: "message.received", source: "api", conversation_id: "facts", disposition: "bound", agent_id: "facts", input: { text: "one" }, data: { n: 3 } });
    expect(one.body.run_id).toMatch(/^run_/);
    expect((await host.admin("GET", `/v1/runs/${one.body.run_id}`)).body.status).toBe("completed");
  });

  it("lists a conversation's runs by the ids its events carry, and refuses a filter it does not know", async () => {
    const mine = await host.admin("GET", `/v1/runs?${query({ agent_id: "facts" })}`);
    expect(mine.body.items).toHaveLength(4);
    // One thread's runs only.
    const threaded = await host.admin("GET", `/v1/runs?${query({ thread_id: "t1" })}`);
    expect([threaded.status, threaded.body.items?.map((r: { thread_id?: string }) => r.thread_id)]).toEqual([200, ["t1"]]);
    expect((await host.admin("GET", `/v1/runs?${query({ bot_id: "another-bot" })}`)).body.items).toEqual([]);
    expect((await host.admin("GET", "/v1/runs?botid=b-facts")).status).toBe(400);
  });

  it("refuses what it cannot answer with the usual errors", async () => {
    expect((await host.admin("GET", "/v1/conversations/transcript")).status).toBe(400);
    expect((await host.admin("GET", `/v1/conversations/events?${query({ cursor: "not-a-cursor" })}`)).status).toBe(400);
    // A transcript cursor is not an EventLog cursor.
    const page = await host.admin("GET", `/v1/conversations/transcript?${query({ limit: "1" })}`);
    expect((await host.admin("GET", `/v1/conversations/events?${query({ cursor: page.body.next_cursor })}`)).status).toBe(400);
    expect((await host.admin("GET", "/v1/events/nope")).status).toBe(404);
    expect((await fetch(`${host.url}/v1/conversations/events?${query()}`)).status).toBe(401);
    expect((await fetch(`${host.url}/v1/events/facts-one`)).status).toBe(401);
  });
});
