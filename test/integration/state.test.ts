import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { deniedCalls, putAgent, startScriptedRunner } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const ALL_SCOPES = ["conversation", "actor", "subject", "runner"];
const SEED = "external.conversation_id";

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "stateful" });
  // Small retention batches: what a deleted agent leaves is deleted by the cron two rows per invocation.
  host = await startTestHost({ vars: { RETENTION_BATCH_SIZE: "2", RETENTION_MAX_BATCHES: "1" } });
  await runner.register(host);
  const onBot = (agent_id: string, bot: string, state_policy: Record<string, unknown>) =>
    putAgent(host, { agent_id, runner_id: runner.runnerId(), scope: { type: "bot", id: bot }, state_policy });
  await onBot("all-scopes", "bot-all", { state_scopes: ALL_SCOPES });
  await onBot("all-scopes-twin", "bot-twin", { state_scopes: ALL_SCOPES });
  await onBot("conversation-only", "bot-conv", { state_scopes: ["conversation"] });
  await onBot("actor-only", "bot-actor", { state_scopes: ["actor"] });
  await onBot("stateless", "bot-none", { enable_state: false, state_scopes: ALL_SCOPES });
  await onBot("default-policy", "bot-default", {});
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** An event of `bot` from `actor` about `subject`; every test uses its own conversation ids. */
const on = (bot: string, actor: string, subject?: string, extra: Record<string, unknown> = {}) => ({
  bot_id: bot,
  actor: { actor_type: "user", actor_id: actor },
  ...(subject ? { subject: { subject_type: "ticket", subject_id: subject } } : {}),
  ...extra,
});
const droppedResults = (runId: string) =>
  host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [runId]).then((rows) => rows.map((r) => JSON.parse(r.data_json)));

describe("state (PROTOCOL §9)", () => {
  it("keys each of the four scopes by its own identity, through state.set and state.updated alike", async () => {
    // Written once: two scopes through the Host API, two through results.
    await runner.run(host, "st-c1", async (api, _ctx, emit) => {
      await api("state.set", { scope: "conversation", key: "who", value: "c1" });
      await api("state.set", { scope: "actor", key: "who", value: "u1" });
      emit("state.updated", { scope: "subject", key: "who", value: "T1" });
      emit("state.updated", { scope: "runner", key: "who", value: "agent all-scopes" });
    }, on("bot-all", "u1", "T1"));

    const stateIn = async (conversation: string, event: Record<string, unknown>) =>
      (await runner.run(host, conversation, async (_api, ctx) => ctx.state, event)).result;
    const who = (state: Record<string, Record<string, unknown>>) => Object.fromEntries(Object.entries(state).map(([scope, values]) => [scope, values.who ?? null]));

    // Same conversation, another actor and subject.
    expect(who(await stateIn("st-c1", on("bot-all", "u2", "T2")))).toEqual({ conversation: "c1", actor: null, subject: null, runner: "agent all-scopes" });
    // Same actor and subject, another conversation.
    expect(who(await stateIn("st-c2", on("bot-all", "u1", "T1")))).toEqual({ conversation: null, actor: "u1", subject: "T1", runner: "agent all-scopes" });
    // A thread is a conversation of its own.
    expect(who(await stateIn("st-c1", on("bot-all", "u1", "T1", { thread_id: "th-1" })))).toEqual({ conversation: null, actor: "u1", subject: "T1", runner: "agent all-scopes" });
    // Another agent on the same runner is another binding: nothing is shared.
    expect(who(await stateIn("st-c1", on("bot-twin", "u1", "T1")))).toEqual({ conversation: null, actor: null, subject: null, runner: null });
    // Another workspace is another tenant: nothing is shared either.
    expect(who(await stateIn("st-c1", on("bot-all", "u1", "T1", { workspace_id: "ws-other" })))).toEqual({ conversation: null, actor: null, subject: null, runner: null });
  });

  it("sends only enabled, identified scopes and refuses the others for calls and results", async () => {
    const noSubject = await runner.run(host, "st-nosubject", async (api, ctx, emit) => {
      emit("state.updated", { scope: "subject", key: "k", value: 1 });
      return { scopes: ctx.runtime.metadata.state_scopes, subject: ctx.state.subject, get: await api("state.get", { scope: "subject", key: "k" }) };
    }, on("bot-all", "u1"));
    // Every scope is in ctx.state (LangBot's shape); the disabled one empty.
    expect([noSubject.result.scopes, noSubject.result.subject]).toEqual([["conversation", "actor", "runner"], {}]);
    expect(noSubject.result.get.status).toBe(403);
    expect(await droppedResults(noSubject.runId)).toEqual([expect.objectContaining({ result_type: "state.updated", reason: expect.stringMatching(/subject/) })]);

    const narrowed = await runner.run(host, "st-narrow", async (api, ctx, emit) => {
      emit("state.updated", { scope: "actor", key: "k", value: 1 });
      emit("state.updated", { scope: "conversation", key: "k", value: 1 });
      return {
        scopes: ctx.runtime.metadata.state_scopes,
        actor: await api("state.set", { scope: "actor", key: "k", value: 2 }),
        runner: await api("state.list", { scope: "runner" }),
        conversation: await api("state.get", { scope: "conversation", key: "k" }),
      };
    }, on("bot-conv", "u1", "T1"));
    expect(narrowed.result.scopes).toEqual(["conversation"]);
    expect([narrowed.result.actor.status, narrowed.result.runner.status]).toEqual([403, 403]);
    expect(narrowed.result.conversation.status).toBe(200);
    expect((await droppedResults(narrowed.runId)).map((d) => d.reason)).toEqual([expect.stringMatching(/actor/)]);
    expect((await deniedCalls(host, narrowed.runId)).map((d) => [d.action, d.resource])).toEqual([
      ["state.set", { scope: "actor" }],
      ["state.list", { scope: "runner" }],
    ]);
    // The result written in the run is there for the next one.
    const next = await runner.run(host, "st-narrow", async (_api, ctx) => ctx.state, on("bot-conv", "u1", "T1"));
    expect(next.result.conversation.k).toBe(1);
  });

  it("says why a scope is refused: the event lacks its identity, or the agent's policy does not enable it", async () => {
    // The policy enables actor and subject; the event names neither an actor id nor a subject.
    const unidentified = await runner.run(host, "st-why-event", async (api, _ctx, emit) => {
      emit("state.updated", { scope: "actor", key: "k", value: 1 });
      return (await api("state.get", { scope: "subject", key: "k" })).body.error?.message;
    }, { bot_id: "bot-all", actor: { actor_type: "user" } });
    expect(unidentified.result).toBe(`state scope "subject" is enabled by the agent's state_policy, but this run's event has no subject_type and subject_id`);
    expect((await droppedResults(unidentified.runId)).map((d) => d.reason)).toEqual([`state scope "actor" is enabled by the agent's state_policy, but this run's event has no actor_type and actor_id`]);

    // The event names an actor; the policy enables only the conversation.
    const disabled = await runner.run(host, "st-why-policy", async (api, _ctx, emit) => {
      emit("state.updated", { scope: "runner", key: "k", value: 1 });
      return (await api("state.set", { scope: "actor", key: "k", value: 1 })).body.error?.message;
    }, on("bot-conv", "u1"));
    expect(disabled.result).toBe(`state scope "actor" is not enabled by the agent's state_policy`);
    expect((await droppedResults(disabled.runId)).map((d) => d.reason)).toEqual([`state scope "runner" is not enabled by the agent's state_policy`]);

    // Its only scope unidentified, the run has no state at all (available_apis.state false): the refusal still says why.
    const none = await runner.run(host, "st-why-none", async (api, ctx) => ({
      available: ctx.context.available_apis.state,
      actor: (await api("state.get", { scope: "actor", key: "k" })).body.error?.message,
      conversation: (await api("state.set", { scope: "conversation", key: "k", value: 1 })).body.error?.message,
    }), { bot_id: "bot-actor", actor: { actor_type: "user" } });
    expect(none.result).toEqual({
      available: false,
      actor: `state scope "actor" is enabled by the agent's state_policy, but this run's event has no actor_type and actor_id`,
      conversation: `state scope "conversation" is not enabled by the agent's state_policy`,
    });
  });

  it("turns state off entirely when the policy disables it", async () => {
    const { result, runId } = await runner.run(host, "st-off", async (api, ctx, emit) => {
      emit("state.updated", { scope: "conversation", key: "k", value: 1 });
      return { state: ctx.state, available: ctx.context.available_apis.state, get: await api("state.get", { scope: "conversation", key: "k" }) };
    }, on("bot-none", "u1", "T1"));
    expect(result.state).toEqual({ conversation: {}, actor: {}, subject: {}, runner: {} });
    expect(result.available).toBe(false);
    expect([result.get.status, result.get.body.error.code]).toEqual([403, "unauthorized"]);
    expect(await deniedCalls(host, runId)).toEqual([expect.objectContaining({ action: "state.get", resource: { action: "state.get", api: "state" } })]);
    expect(await droppedResults(runId)).toHaveLength(1);
    // Not even the seed is written.
    expect(await host.query("SELECT key FROM runner_state WHERE value_json = ?", [JSON.stringify("st-off")])).toEqual([]);
  });

  it("refuses a whole number beyond 2^53 − 1 (JSON parsing rounds it) in calls and results, and keeps one within", async () => {
    // 2^53 + 2 is exact as a double, but the same parsed value comes from the text 9007199254740993: which was sent is lost.
    const beyond = 2 ** 53 + 2;
    const { result, runId } = await runner.run(host, "st-bigint", async (api, _ctx, emit) => {
      emit("state.updated", { scope: "conversation", key: "emitted", value: { id: beyond } });
      emit("state.updated", { scope: "conversation", key: "within", value: [Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 1.5e300] });
      const set = await api("state.set", { scope: "conversation", key: "set", value: [1, { snowflake: -beyond }] });
      return { status: set.status, code: set.body.error?.code, message: set.body.error?.message };
    }, on("bot-conv", "u1"));
    expect(result).toEqual({ status: 400, code: "invalid_argument", message: expect.stringContaining(`${-beyond} is beyond ±(2^53 − 1) and cannot be kept exactly; send it as a string`) });
    expect(await droppedResults(runId)).toEqual([expect.objectContaining({ result_type: "state.updated", reason: expect.stringContaining(`${beyond} is beyond`) })]);
    const kept = await runner.run(host, "st-bigint", async (_api, ctx) => ctx.state.conversation, on("bot-conv", "u1"));
    expect([kept.result.emitted, kept.result.set, kept.result.within]).toEqual([undefined, undefined, [Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 1.5e300]]);
  });

  it("keeps a value of exactly 256 KiB serialised (the UTF-8 bytes of its JSON), by call and by result, and refuses one byte more", async () => {
    const MAX = 256 * 1024;
    // Two quotes around each: `ascii` is 1 byte a character, `wide` 2.
    const ascii = "x".repeat(MAX - 2);
    const wide = "é".repeat(MAX / 2 - 1);
    const { result, runId } = await runner.run(host, "st-bound", async (api, _ctx, emit) => {
      emit("state.updated", { scope: "conversation", key: "result.exact", value: ascii });
      emit("state.updated", { scope: "conversation", key: "result.over", value: `${ascii}x` });
      const set = async (key: string, value: string) => {
        const res = await api("state.set", { scope: "conversation", key, value });
        return [res.status, res.body.error?.code ?? null];
      };
      return { exact: await set("call.exact", ascii), wide: await set("call.wide", wide), over: await set("call.over", `${ascii}x`), wideOver: await set("call.wide_over", `${wide}x`) };
    }, on("bot-conv", "u1"));
    expect(result).toEqual({ exact: [200, null], wide: [200, null], over: [413, "payload_too_large"], wideOver: [413, "payload_too_large"] });
    expect(await droppedResults(runId)).toEqual([expect.objectContaining({ result_type: "state.updated", reason: expect.stringContaining(`larger than ${MAX} bytes serialised`) })]);
    const kept = await runner.run(host, "st-bound", async (api) => {
      const { keys } = (await api("state.list", { scope: "conversation" })).body.data;
      const value = async (key: string) => (await api("state.get", { scope: "conversation", key })).body.data.value;
      return { keys, same: [(await value("call.exact")) === ascii, (await value("call.wide")) === wide, (await value("result.exact")) === ascii] };
    }, on("bot-conv", "u1"));
    expect(kept.result).toEqual({ keys: ["call.exact", "call.wide", SEED, "result.exact"], same: [true, true, true] });
  });

  it("enables conversation and actor by default", async () => {
    const { result } = await runner.run(host, "st-default", async (_api, ctx) => ctx.runtime.metadata.state_scopes, on("bot-default", "u1", "T1"));
    expect(result).toEqual(["conversation", "actor"]);
  });

  it("seeds external.conversation_id when absent and never overwrites the runner's value", async () => {
    const first = await runner.run(host, "st-seed", async (api, ctx) => {
      const seeded = { snapshot: ctx.state.conversation[SEED], stored: await api("state.get", { scope: "conversation", key: SEED }) };
      await api("state.set", { scope: "conversation", key: SEED, value: "dify-123" });
      return seeded;
    }, on("bot-all", "u1"));
    expect(first.result.snapshot).toBe("st-seed");
    expect(first.result.stored.body.data).toEqual({ value: "st-seed", found: true });
    const second = await runner.run(host, "st-seed", async (api, ctx) => {
      await api("state.delete", { scope: "conversation", key: SEED });
      return ctx.state.conversation[SEED];
    }, on("bot-all", "u1"));
    expect(second.result).toBe("dify-123");
    const third = await runner.run(host, "st-seed", async (_api, ctx) => ctx.state.conversation[SEED], on("bot-all", "u1"));
    expect(third.result).toBe("st-seed");
  });

  it("lists keys by literal prefix with has_more and an opaque cursor, and caps values", async () => {
    const { result } = await runner.run(host, "st-list", async (api) => {
      for (const key of ["notes.a", "notes.b", "notes.c", "notes%", "notesX", "other"]) await api("state.set", { scope: "actor", key, value: key });
      const first = await api("state.list", { scope: "actor", prefix: "notes.", limit: 2 });
      const second = await api("state.list", { scope: "actor", prefix: "notes.", limit: 2, cursor: first.body.data.next_cursor });
      return {
        first: first.body.data,
        second: second.body.data,
        percent: (await api("state.list", { scope: "actor", prefix: "notes%" })).body.data.keys,
        all: (await api("state.list", { scope: "actor" })).body.data.keys,
        too_big: await api("state.set", { scope: "actor", key: "big", value: "x".repeat(256 * 1024) }),
        bad_cursor: await api("state.list", { scope: "actor", cursor: "%%%" }),
      };
    }, on("bot-all", "u-list"));
    expect(result.first).toMatchObject({ keys: ["notes.a", "notes.b"], has_more: true });
    expect(result.second).toMatchObject({ keys: ["notes.c"], has_more: false });
    expect(result.percent).toEqual(["notes%"]);
    expect(result.all).toEqual(["notes%", "notes.a", "notes.b", "notes.c", "notesX", "other"]);
    expect([result.too_big.status, result.too_big.body.error.code]).toEqual([413, "payload_too_large"]);
    expect(result.bad_cursor.status).toBe(400);
  });

  it("gives every scope its own first keys in the snapshot, however many another scope holds", async () => {
    const many = await runner.run(host, "st-many", async (_api, _ctx, emit) => {
      // More than the 100-per-scope snapshot cap times the run's three scopes, all sorting before "z".
      for (let i = 0; i < 310; i++) emit("state.updated", { scope: "actor", key: `a${String(i).padStart(3, "0")}`, value: i });
      emit("state.updated", { scope: "conversation", key: "z", value: "kept" });
    }, on("bot-all", "u-many"));
    expect(many.result).toBeNull();
    const { result } = await runner.run(
      host,
      "st-many",
      async (_api, ctx) => ({ actor: Object.keys(ctx.state.actor).length, z: ctx.state.conversation.z, partial: ctx.runtime.metadata.state_partial }),
      on("bot-all", "u-many"),
    );
    expect(result).toEqual({ actor: 100, z: "kept", partial: ["actor"] });
  });

  it("keeps each scope's snapshot within 1 MiB of values, says which scopes are partial, and serves the rest through state.get", async () => {
    const big = (i: number) => `${i}`.repeat(250 * 1024);
    await runner.run(host, "st-big", async (api, _ctx, emit) => {
      for (let i = 1; i <= 5; i++) emit("state.updated", { scope: "actor", key: `big.${i}`, value: big(i) });
      await api("state.set", { scope: "conversation", key: "small", value: "s" });
    }, on("bot-all", "u-big"));
    const { result } = await runner.run(host, "st-big", async (api, ctx) => ({
      actor: Object.keys(ctx.state.actor),
      conversation: ctx.state.conversation,
      partial: ctx.runtime.metadata.state_partial,
      fifth: (await api("state.get", { scope: "actor", key: "big.5" })).body,
    }), on("bot-all", "u-big"));
    // Four values of 250 KiB (plus quotes) fit in 1 MiB; the fifth is left to state.get.
    expect(result.actor).toEqual(["big.1", "big.2", "big.3", "big.4"]);
    expect(result.conversation).toEqual({ "external.conversation_id": "st-big", small: "s" });
    expect(result.partial).toEqual(["actor"]);
    expect(result.fifth).toMatchObject({ ok: true, data: { value: big(5) } });
  });

  it("belongs to its agent: deleting the agent leaves its state to the cron, which deletes it in bounded batches, and one created again under its id starts with none", async () => {
    const agent = { agent_id: "reused-id", runner_id: runner.runnerId(), scope: { type: "bot", id: "bot-reused" }, state_policy: { state_scopes: ["conversation", "actor", "runner"] } };
    await putAgent(host, agent);
    // Written both ways: a Host API call and a result.
    await runner.run(host, "reused-conv", async (api, _ctx, emit) => {
      await api("state.set", { scope: "actor", key: "profile", value: { plan: "gold" } });
      await api("state.set", { scope: "runner", key: "session", value: "of the first agent" });
      emit("state.updated", { scope: "conversation", key: "notes", value: "the first customer's ticket" });
    }, on("bot-reused", "ada"));
    const written = await host.query<{ key: string; agent_id: string }>("SELECT key, agent_id FROM runner_state WHERE agent_id = 'reused-id' ORDER BY key");
    expect(written.map((r) => r.key)).toEqual([SEED, "notes", "profile", "session"]);

    const byEpoch = async () =>
      Object.fromEntries((await host.query<{ agent_epoch: string; n: number }>("SELECT agent_epoch, COUNT(*) AS n FROM runner_state WHERE agent_id = 'reused-id' GROUP BY agent_epoch")).map((r) => [r.agent_epoch, r.n]));
    const [first] = Object.keys(await byEpoch());

    expect((await host.admin("DELETE", "/v1/admin/agents/reused-id")).status).toBe(200);
    // Not deleted by the DELETE (an agent's state can be any size: one statement over all of it would hold every
    // conversation's writes), but reachable by nobody from now on.
    expect(await byEpoch()).toEqual({ [first]: 4 });
    await putAgent(host, agent);
    const { result } = await runner.run(host, "reused-conv", async (_api, ctx) => ctx.state, on("bot-reused", "ada"));
    expect(result).toEqual({ conversation: { [SEED]: "reused-conv" }, actor: {}, subject: {}, runner: {} });
    // The cron deletes it, RETENTION_BATCH_SIZE rows per statement and RETENTION_MAX_BATCHES statements per invocation;
    // the state of the agent created again under its id (its seed) stays.
    await host.triggerScheduled();
    expect((await byEpoch())[first]).toBe(2);
    await host.triggerScheduled();
    await host.triggerScheduled();
    expect(Object.entries(await byEpoch())).toEqual([[expect.not.stringMatching(`^${first}$`), 1]]);
    expect(await host.query("SELECT owner_id FROM deleted_owner")).toEqual([]);

    // A PUT is the same agent: its state stays.
    await runner.run(host, "reused-conv", async (api) => void (await api("state.set", { scope: "runner", key: "session", value: "kept" })), on("bot-reused", "ada"));
    await putAgent(host, { ...agent, name: "renamed" });
    const after = await runner.run(host, "reused-conv", async (_api, ctx) => ctx.state.runner, on("bot-reused", "ada"));
    expect(after.result).toEqual({ session: "kept" });
  });
});
