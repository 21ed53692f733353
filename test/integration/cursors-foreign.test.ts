import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A cursor belongs to the listing that issued it. One carried to another
 * conversation (or another run's ledger) is a 400, not a page of that other
 * listing taken from a position that means nothing there.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const A = "cursor-home";
const B = "cursor-abroad";
const runIds: Record<string, string[]> = { [A]: [], [B]: [] };

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "foreign-cursors" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "foreign-cursors", runner_id: runner.runnerId() });
  for (const conv of [A, B]) {
    for (const text of ["one", "two", "three"]) runIds[conv].push((await host.waitForRun((await host.postEvent(messageEvent(conv, text))).body.run_id!)).run_id);
  }
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function operatorCursor(path: string) {
  const res = await host.admin("GET", path);
  expect(res.status).toBe(200);
  return res.body.next_cursor as string;
}

describe("a cursor from another listing", () => {
  it("is refused by the operator reads, while it pages its own listing", async () => {
    const transcript = await operatorCursor(`/v1/conversations/transcript?conversation_id=${A}&limit=2`);
    const events = await operatorCursor(`/v1/conversations/events?conversation_id=${A}&limit=1`);
    const ledger = await operatorCursor(`/v1/runs/${runIds[A][0]}/events?limit=1`);
    const statuses = (paths: Record<string, string>) =>
      Promise.all(Object.entries(paths).map(async ([name, path]) => [name, (await host.admin("GET", path)).status] as const)).then(Object.fromEntries);

    expect(await statuses({
      transcript: `/v1/conversations/transcript?conversation_id=${A}&cursor=${transcript}`,
      events: `/v1/conversations/events?conversation_id=${A}&cursor=${events}`,
      ledger: `/v1/runs/${runIds[A][0]}/events?cursor=${ledger}`,
    })).toEqual({ transcript: 200, events: 200, ledger: 200 });

    const foreign = await host.admin("GET", `/v1/conversations/transcript?conversation_id=${B}&cursor=${transcript}`);
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.message).toMatch(/another listing/);
    expect(await statuses({
      events: `/v1/conversations/events?conversation_id=${B}&cursor=${events}`,
      ledger: `/v1/runs/${runIds[B][0]}/events?cursor=${ledger}`,
      // A thread is a listing of its own.
      thread: `/v1/conversations/transcript?conversation_id=${A}&thread_id=t1&cursor=${transcript}`,
    })).toEqual({ events: 400, ledger: 400, thread: 400 });
  });

  it("is refused with invalid_argument by history.page and event.page, while the run's own cursors page", async () => {
    const home = await runner.run(host, A, async (api, ctx) => {
      const events = await api("event.page", { limit: 1 });
      return { latest: ctx.context.latest_cursor, event: events.body.data.next_cursor };
    });
    const abroad = await runner.run(host, B, async (api, ctx) => {
      const answer = async (action: string, params: Record<string, unknown>) => {
        const res = await api(action, params);
        return { status: res.status, code: res.body.error?.code, items: res.body.data?.items?.length };
      };
      return {
        foreignHistory: await answer("history.page", { before_cursor: home.result.latest }),
        foreignAfter: await answer("history.page", { after_cursor: home.result.latest, direction: "forward" }),
        foreignEvents: await answer("event.page", { before_cursor: home.result.event }),
        ownHistory: await answer("history.page", { before_cursor: ctx.context.latest_cursor }),
      };
    });
    expect(abroad.result).toEqual({
      foreignHistory: { status: 400, code: "invalid_argument" },
      foreignAfter: { status: 400, code: "invalid_argument" },
      foreignEvents: { status: 400, code: "invalid_argument" },
      // three messages and their replies came before this run's event in B
      ownHistory: { status: 200, items: 6 },
    });
  });
});
