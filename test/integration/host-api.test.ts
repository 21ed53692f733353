import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, chunkedWithSmallLength, deferred, stalledBody } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const held = { started: deferred<{ runId: string; token: string }>(), release: deferred() };
/** `levels` arrays, one inside the other. */
const nested = (levels: number): unknown => JSON.parse(`${"[".repeat(levels)}${"]".repeat(levels)}`);
/** Small, but nested far deeper than any request. */
const DEEP = `{"action":"history.page","params":{"x":${"[".repeat(20_000)}${"]".repeat(20_000)}}}`;
/** Over the default MAX_API_BODY_BYTES (2 MiB). */
const OVERSIZED = JSON.stringify({ action: "host.version", params: { pad: "x".repeat(2 * 1024 * 1024) } });

/** Whether `check` came true within `ms`. */
async function pollUntil(check: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) if (check()) return true;
  return check();
}

/** A Host API request with a body written by hand: its status and error code. */
async function rawCall(base: string, runId: string, token: string, body: string) {
  const res = await fetch(`${base}/v1/runs/${runId}/api`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body });
  const answer = (await res.json()) as { error?: { code: string } };
  return [res.status, answer.error?.code];
}

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "probe",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const base = ctx.runtime.api.base_url;
      const api = (action: string, params: Record<string, unknown> = {}, runId = ctx.run_id, token = ctx.runtime.api.token) =>
        callHostApi(base, runId, token, action, params);
      const mode = ctx.input.text;
      if (mode === "hold") {
        held.started.resolve({ runId: ctx.run_id, token: ctx.runtime.api.token });
        await held.release.promise;
        return w.reply("held");
      }
      if (mode === "events-both-ways") {
        const newestFirst = (await api("event.page", { limit: 100 })).body.data.items;
        const oldest = newestFirst[newestFirst.length - 1];
        const forward = (await api("event.page", { after_cursor: oldest.cursor, limit: 100 })).body.data.items;
        // As history.page pages: next_cursor goes on the same way, prev_cursor (the page's first item) the other way.
        const first = (await api("event.page", { limit: 1 })).body.data;
        const second = (await api("event.page", { before_cursor: first.next_cursor, limit: 1 })).body.data;
        const back = (await api("event.page", { after_cursor: second.prev_cursor, limit: 1 })).body.data;
        const cursors = { prev_is_first: [first.prev_cursor, second.prev_cursor].map((c, i) => c !== undefined && c === [first, second][i].items[0].cursor), back: back.items.map((e: any) => e.seq), first: first.items.map((e: any) => e.seq) };
        return w.reply(JSON.stringify({ newestFirst: newestFirst.map((e: any) => e.seq), forward: forward.map((e: any) => e.seq), cursors }));
      }
      if (mode === "history-walk") {
        const seqs = (page: any) => page.items.map((i: any) => i.seq);
        // Follows next_cursor with the same direction, as a runner reading the whole history does.
        const walk = async (direction: string, cursorParam: string) => {
          const pages: number[][] = [];
          for (let cursor: string | undefined, page: any; !page || page.has_more; cursor = page.next_cursor) {
            page = (await api("history.page", { direction, limit: 2, ...(cursor ? { [cursorParam]: cursor } : {}) })).body.data;
            pages.push(seqs(page));
            if (pages.length > 10) break;
          }
          return pages;
        };
        const all = (await api("history.page", { direction: "forward", limit: 100 })).body.data.items;
        const at = (seq: number) => all.find((i: any) => i.seq === seq).cursor;
        // prev_cursor of a backward page (its newest item) turns back: forward from it gives what is newer.
        const older = (await api("history.page", { before_cursor: at(5), limit: 2 })).body.data;
        const turned = (await api("history.page", { direction: "forward", after_cursor: older.prev_cursor, limit: 100 })).body.data;
        return w.reply(JSON.stringify({
          all: all.map((i: any) => i.seq),
          backward: await walk("backward", "before_cursor"),
          forward: await walk("forward", "after_cursor"),
          // Both cursors: the items strictly between them, in the page's direction.
          window_forward: seqs((await api("history.page", { direction: "forward", after_cursor: at(2), before_cursor: at(6), limit: 100 })).body.data),
          window_backward: seqs((await api("history.page", { direction: "backward", after_cursor: at(2), before_cursor: at(6), limit: 100 })).body.data),
          older: seqs(older),
          turned: seqs(turned),
        }));
      }
      if (mode === "nulls") {
        // As a Python or Go runner sends what it leaves unset: null, for parameters with defaults too.
        const page = await api("history.page", { limit: null, direction: null, before_cursor: null, include_artifacts: null });
        const events = await api("event.page", { limit: null, after_cursor: null });
        const keys = await api("state.list", { scope: "conversation", limit: null, prefix: null, cursor: null });
        const bad = await api("history.page", { limit: "20" });
        return w.reply(JSON.stringify({
          page: [page.status, page.body.data?.items?.length > 0], events: [events.status, events.body.data?.items?.length > 0],
          keys: keys.status, bad: [bad.status, bad.body.error?.code],
        }));
      }
      if (mode === "events") {
        const page = await api("event.page", { limit: 100 });
        return w.reply(JSON.stringify(page.body.data.items.filter((e: any) => e.event_type === "host_api.denied").map((e: any) => e.metadata)));
      }
      if (mode === "log-probe") {
        await api("history.page", { limit: 1 });
        await api("state.set", { scope: "conversation", key: "log.k", value: "secret-value" });
        await api("history.page", { conversation_id: "api-other" });
        await api("history.search", { query: "x" });
        await api("host.version", {}, ctx.run_id, "not-a-token");
        await rawCall(base, ctx.run_id, ctx.runtime.api.token, OVERSIZED);
        return w.reply(JSON.stringify({ token: ctx.runtime.api.token }));
      }
      if (mode !== "probe") return w.reply("plain");
      const other = await held.started.promise;
      const results: Record<string, unknown> = {
        own_history: await api("history.page", { limit: 5 }),
        other_history: await api("history.page", { conversation_id: "api-other" }),
        other_event: await api("event.get", { event_id: "api-other-event" }),
        own_event: await api("event.get", { event_id: ctx.event.event_id }),
        not_granted: await api("history.search", { query: "x" }),
        disabled_scope: await api("state.get", { scope: "subject", key: "k" }),
        own_token_other_run: await api("host.version", {}, other.runId),
        other_token_this_run: await api("host.version", {}, ctx.run_id, other.token),
        wrong_token: await api("host.version", {}, ctx.run_id, "not-a-token"),
        state_set: await api("state.set", { scope: "conversation", key: "notes.a", value: { n: 1 } }),
        state_set_b: await api("state.set", { scope: "conversation", key: "notes.b", value: [1, 2] }),
        state_get: await api("state.get", { scope: "conversation", key: "notes.a" }),
        state_list: await api("state.list", { scope: "conversation", prefix: "notes.", limit: 1 }),
        state_delete: await api("state.delete", { scope: "conversation", key: "notes.b" }),
        state_too_big: await api("state.set", { scope: "conversation", key: "big", value: "x".repeat(300 * 1024) }),
        state_too_big_disabled_scope: await api("state.set", { scope: "subject", key: "big", value: "x".repeat(300 * 1024) }),
        // As deep as a JSON value may be, inside the request's own envelope; one level more is refused.
        state_deepest: await api("state.set", { scope: "conversation", key: "deep", value: nested(64) }),
        state_too_deep: await api("state.set", { scope: "conversation", key: "deep", value: nested(65) }),
        version: await api("host.version"),
        unknown_action: await api("teleport"),
        bad_params: await api("history.page", { limit: 0 }),
        // §8: the token before the payload.
        oversized: await rawCall(base, ctx.run_id, ctx.runtime.api.token, OVERSIZED),
        oversized_wrong_token: await rawCall(base, ctx.run_id, "not-a-token", OVERSIZED),
        // Drained, not reset: the answer waits for the body, so it reaches the client.
        oversized_stalled: await stalledBody(`${base}/v1/runs/${ctx.run_id}/api`, { method: "POST", token: "not-a-token", declared: 3 * 1024 * 1024, first: 64 * 1024, pauseMs: 300 }),
        not_json: await rawCall(base, ctx.run_id, ctx.runtime.api.token, "{nope"),
        not_json_wrong_token: await rawCall(base, ctx.run_id, "not-a-token", "{nope"),
        // Hostile nesting is refused as a bad argument, not a crash, and still only after the token.
        too_deep: await rawCall(base, ctx.run_id, ctx.runtime.api.token, DEEP),
        too_deep_wrong_token: await rawCall(base, ctx.run_id, "not-a-token", DEEP),
      };
      w.reply(JSON.stringify(results));
    },
  });
  host = await startTestHost({ captureLogs: true });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "probe" });
});
afterAll(async () => {
  held.release.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("Host API: every call checked against the run's frozen snapshot", () => {
  it("authorises, scopes and refuses as §8 says, and audits denials", async () => {
    const other = await host.postEvent(messageEvent("api-other", "plain", { event_id: "api-other-event" }));
    await host.waitForRun(other.body.run_id!);
    const hold = await host.postEvent(messageEvent("api-held", "hold"));
    await held.started.promise;

    const probe = await host.postEvent(messageEvent("api-main", "probe"));
    const run = await host.waitForRun(probe.body.run_id!);
    expect(run.status).toBe("completed");
    const r = JSON.parse(String(run.message?.content));
    const status = (k: string) => r[k].status;
    const code = (k: string) => r[k].body.error?.code;

    expect(status("own_history")).toBe(200);
    expect(r.own_history.body.data.items[0]).toMatchObject({ role: "user", content: "probe" });
    expect(status("own_event")).toBe(200);
    expect(r.own_event.body.data).toMatchObject({ event_type: "message.received", conversation_id: "api-main" });
    expect([status("other_history"), code("other_history")]).toEqual([403, "unauthorized"]);
    expect([status("other_event"), code("other_event")]).toEqual([403, "unauthorized"]);
    expect([status("not_granted"), code("not_granted")]).toEqual([403, "unauthorized"]);
    expect([status("disabled_scope"), code("disabled_scope")]).toEqual([403, "unauthorized"]);
    expect(status("own_token_other_run")).toBe(401);
    expect(status("other_token_this_run")).toBe(401);
    expect(status("wrong_token")).toBe(401);
    expect(status("state_set")).toBe(200);
    expect(r.state_get.body.data).toEqual({ value: { n: 1 }, found: true });
    expect(r.state_list.body.data).toMatchObject({ keys: ["notes.a"], has_more: true });
    expect(status("state_delete")).toBe(200);
    expect([status("state_too_big"), code("state_too_big")]).toEqual([413, "payload_too_large"]);
    // §8: scope before payload size, so a denial is a denial (and audited) whatever the payload.
    expect([status("state_too_big_disabled_scope"), code("state_too_big_disabled_scope")]).toEqual([403, "unauthorized"]);
    expect(status("state_deepest")).toBe(200);
    expect([status("state_too_deep"), code("state_too_deep")]).toEqual([400, "invalid_argument"]);
    expect(r.version.body).toEqual({ ok: true, data: { version: "0.1.0" } });
    expect([status("unknown_action"), code("unknown_action")]).toEqual([404, "not_found"]);
    expect([status("bad_params"), code("bad_params")]).toEqual([400, "invalid_argument"]);
    expect(r.oversized).toEqual([413, "payload_too_large"]);
    expect(r.not_json).toEqual([400, "invalid_argument"]);
    expect(r.oversized_wrong_token).toEqual([401, "unauthorized"]);
    expect(r.oversized_stalled).toEqual({ answeredDuringPause: false, status: 401 });
    expect(r.not_json_wrong_token).toEqual([401, "unauthorized"]);
    expect(r.too_deep).toEqual([400, "invalid_argument"]);
    expect(r.too_deep_wrong_token).toEqual([401, "unauthorized"]);

    // A finished run's token no longer works.
    const ended = runner.calls.find((c) => c.body.context.run_id === probe.body.run_id)!.body.context.runtime.api.token;
    expect((await callHostApi(host.url, probe.body.run_id!, ended, "host.version")).status).toBe(401);

    // Denials are in EventLog with run, runner, action and scope.
    const audit = await host.postEvent(messageEvent("api-main", "events"));
    const denials = JSON.parse(String((await host.waitForRun(audit.body.run_id!)).message?.content));
    expect(denials.map((d: any) => d.action).sort()).toEqual(["event.get", "history.page", "history.search", "state.get", "state.set"]);
    for (const d of denials) {
      expect(d).toMatchObject({ run_id: probe.body.run_id, runner_id: runner.runnerId(), scope: { conversation_id: "api-main" } });
      expect(d.resource).toBeTypeOf("object");
    }

    held.release.resolve();
    expect((await host.waitForRun(hold.body.run_id!)).status).toBe("completed");
  });

  it("logs every decision, allowed or not, with run, runner, action, resource, scope and outcome, and never a token or a value", async () => {
    const probe = await host.postEvent(messageEvent("api-log", "log-probe"));
    const run = await host.waitForRun(probe.body.run_id!);
    const { token } = JSON.parse(String(run.message?.content));
    const runId = probe.body.run_id!;
    // The lines reach this process through workerd's stdout, a little after the answers.
    await expect.poll(() => host.decisions(runId).length).toBe(6);
    const [allowed, setState, crossConversation, notGranted, badToken, tooLarge] = host.decisions(runId);
    const own = { run_id: runId, runner_id: runner.runnerId(), scope: { conversation_id: "api-log", thread_id: null } };
    expect(allowed).toMatchObject({ ...own, action: "history.page", outcome: "allowed", status: 200, resource: {} });
    expect(setState).toEqual({ log: "host_api.decision", ...own, action: "state.set", resource: { scope: "conversation", key: "log.k" }, outcome: "allowed", status: 200 });
    expect(crossConversation).toMatchObject({ ...own, action: "history.page", outcome: "unauthorized", status: 403, resource: { conversation_id: "api-other" } });
    expect(notGranted).toMatchObject({ ...own, action: "history.search", outcome: "unauthorized", status: 403, resource: { api: "history_search" } });
    expect(badToken).toMatchObject({ ...own, action: null, outcome: "unauthorized", status: 401 });
    expect(tooLarge).toMatchObject({ ...own, action: null, outcome: "payload_too_large", status: 413 });
    // A call naming a run this host does not know is logged too, with no runner.
    await fetch(`${host.url}/v1/runs/run_unknown/api`, { method: "POST", headers: { authorization: "Bearer nope" }, body: "{}" });
    await expect.poll(() => host.decisions("run_unknown")).toEqual([{ log: "host_api.decision", run_id: "run_unknown", runner_id: null, action: null, resource: {}, scope: { conversation_id: null, thread_id: null }, outcome: "unauthorized", status: 401 }]);
    expect(host.logs()).not.toContain(token);
    expect(host.logs()).not.toContain("secret-value");
  });

  it("takes null for a parameter left unset, defaults included, and still refuses a wrong type", async () => {
    const res = await host.postEvent(messageEvent("api-nulls", "nulls"));
    expect(JSON.parse(String((await host.waitForRun(res.body.run_id!)).message?.content))).toEqual({
      page: [200, true], events: [200, true], keys: 200, bad: [400, "invalid_argument"],
    });
  });

  it("pages EventLog backward with before_cursor and forward with after_cursor, prev_cursor naming where to turn back", async () => {
    for (const text of ["one", "two"]) await host.waitForRun((await host.postEvent(messageEvent("api-pages", text))).body.run_id!);
    const res = await host.postEvent(messageEvent("api-pages", "events-both-ways"));
    const { newestFirst, forward, cursors } = JSON.parse(String((await host.waitForRun(res.body.run_id!)).message?.content));
    expect(newestFirst.length).toBeGreaterThanOrEqual(3);
    expect(forward).toEqual([...newestFirst].reverse().slice(1));
    // prev_cursor, as history.page gives it: the page's first item, from which after_cursor pages back the other way.
    expect(cursors).toEqual({ prev_is_first: [true, true], back: cursors.first, first: [newestFirst[0]] });
  });

  it("pages the Transcript both ways with history.page: next_cursor goes on the same way, prev_cursor turns back, two cursors bound a window", async () => {
    for (const text of ["one", "two", "three"]) await host.waitForRun((await host.postEvent(messageEvent("api-history-walk", text))).body.run_id!);
    const res = await host.postEvent(messageEvent("api-history-walk", "history-walk"));
    const out = JSON.parse(String((await host.waitForRun(res.body.run_id!)).message?.content));
    // Three exchanges (a user and an assistant item each), then the walk's own message.
    expect(out.all).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(out.backward).toEqual([[7, 6], [5, 4], [3, 2], [1]]);
    expect(out.forward).toEqual([[1, 2], [3, 4], [5, 6], [7]]);
    expect([out.window_forward, out.window_backward]).toEqual([[3, 4, 5], [5, 4, 3]]);
    expect([out.older, out.turned]).toEqual([[4, 3], [5, 6, 7]]);
  });

  it("checks the token of a large body before reading it, so an anonymous caller never has it buffered", async () => {
    const res = await host.postEvent(messageEvent("api-large-anonymous", "plain"));
    const runId = res.body.run_id!;
    await host.waitForRun(runId);
    // Under the body cap, over what is read before the token: the refusal is decided while the body is still stalled.
    const refusedBeforeBody = () =>
      pollUntil(() => host.decisions(runId).some((d) => d.status === 401), 3_000);
    const answer = await stalledBody(`${host.url}/v1/runs/${runId}/api`, { method: "POST", token: "not-a-token", declared: 1024 * 1024, first: 16 * 1024, pauseMs: 0, duringPause: refusedBeforeBody });
    // Still drained, not reset: the client reads its answer once it has sent the rest.
    expect(answer).toEqual({ answeredDuringPause: false, status: 401, seenDuringPause: true });
  });

  it("checks the token first when a small Content-Length comes beside Transfer-Encoding, which the chunked body ignores", async () => {
    const res = await host.postEvent(messageEvent("api-length-and-chunked", "plain"));
    const runId = res.body.run_id!;
    await host.waitForRun(runId);
    // workerd passes both headers on: the body is read chunked, so the 16 bytes declared bound nothing.
    const refusedBeforeBody = () => pollUntil(() => host.decisions(runId).some((d) => d.status === 401), 3_000);
    const answer = await chunkedWithSmallLength(`${host.url}/v1/runs/${runId}/api`, { token: "not-a-token", declared: 16, first: 16 * 1024, rest: 16 * 1024, duringPause: refusedBeforeBody });
    expect(answer).toEqual({ seenDuringPause: true, status: 401 });
  });

  it("refuses a Host API call with no token or an unknown run id with 401", async () => {
    const res = await fetch(`${host.url}/v1/runs/run_nope/api`, { method: "POST", body: JSON.stringify({ action: "host.version" }) });
    expect(res.status).toBe(401);
    expect((await res.json()) as any).toMatchObject({ ok: false, error: { code: "unauthorized" } });
    // The path's run id is the caller's to choose: its decision line names it cut, whatever its length.
    const long = `run_${"x".repeat(8000)}`;
    expect((await fetch(`${host.url}/v1/runs/${long}/api`, { method: "POST", body: "{}" })).status).toBe(401);
    const lines = () => host.logs().split("\n").filter((l) => l.includes(`"run_id":"run_xxxx`));
    await expect.poll(() => lines().length).toBe(1);
    expect(lines()[0].length).toBeLessThan(1000);
  });
});
