import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { waitFor } from "../support/fake-platform";
import { messageEvent, type TestHost } from "../support/host";
import type { RunCall } from "../support/runner";

/**
 * Hammer a conversation with concurrent posts under each strategy, then check every event's fate: exactly one of
 * its own run, a steering item injected, a steering item dropped for good (by a run an interrupt stopped), or
 * rejected; a steering item dropped otherwise is decided anew (README "Steering"), once per run that dropped it, so its
 * fate is what that decision made of it; ingress answer, GET /v1/events and EventLog agree; the runner saw each
 * message at most once (exactly once when run or injected).
 */
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
let steerer: typeof setup.steerer;
let plain: typeof setup.plain;
const gate = (conversation: string) => setup.gate(conversation);
const agentFor = (...args: Parameters<typeof setup.agentFor>) => setup.agentFor(...args);
const seenAsRun = new Map<string, number>();
const seenInPull = new Map<string, number>();
const runsStarted = new Map<string, string[]>();
const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, conversation, text, api } = runOf(call, res);
  runsStarted.set(conversation, [...(runsStarted.get(conversation) ?? []), text]);
  bump(seenAsRun, text);
  const pull = async () => {
    if (ctx.config.pull === "never") return;
    // "double": three pulls at once, as a runner with concurrent turns might.
    const n = ctx.config.pull === "double" ? 3 : 1;
    const rs = await Promise.all(Array.from({ length: n }, () => api("steering.pull", ctx.config.pull === "one" ? { mode: "one-at-a-time" } : {})));
    for (const r of rs) for (const i of r.body.data?.items ?? []) bump(seenInPull, i.input.text);
  };
  if (text.startsWith("hold")) {
    let open = false;
    void gate(conversation).promise.then(() => (open = true));
    while (!open) {
      await pull();
      await new Promise((r) => setTimeout(r, 10));
    }
  } else await new Promise((r) => setTimeout(r, 5));
  await pull();
  w.reply(`re: ${text}`);
}

beforeAll(async () => {
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: { events: ["get", "page"] } }]);
  ({ host, steerer, plain } = setup);
});
afterAll(async () => {
  await setup?.dispose();
});

interface Post {
  text: string;
  eventId: string;
  answer: { status: number; body: { event_id: string; run_id: string | null; disposition: string } };
}

/** Every violation of the fate invariants, once they have settled; `moots`: an interrupt may have stopped a run, its claims dropped for good. */
async function violations(posts: Post[], { moots = false } = {}): Promise<string[]> {
  const out: string[] = [];
  for (const p of posts) {
    const { disposition, run_id } = p.answer.body;
    const tag = `${p.text} (${disposition} ${run_id})`;
    if (p.answer.status !== 202) out.push(`${tag}: status ${p.answer.status}`);
    const ev = (await host.admin("GET", `/v1/events/${p.eventId}`)).body;
    const outcomes = await host.query<{ event_type: string; run_id: string; data: string }>(
      "SELECT event_type, run_id, data_json AS data FROM event_log WHERE event_type LIKE 'steering.%' AND json_extract(data_json, '$.source_event_id') = ?",
      [p.eventId],
    );
    const runRows = await host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE event_id = ?", [p.eventId]);
    const asRun = seenAsRun.get(p.text) ?? 0;
    const inPull = seenInPull.get(p.text) ?? 0;
    if (disposition === "started" || disposition === "queued") {
      if (ev.disposition !== "bound" || ev.run_id !== run_id) out.push(`${tag}: GET says ${ev.disposition} ${ev.run_id}`);
      if (outcomes.length) out.push(`${tag}: also has steering records ${outcomes.map((o) => o.event_type)}`);
      if (runRows.length !== 1 || runRows[0].run_id !== run_id) out.push(`${tag}: run rows ${JSON.stringify(runRows)}`);
      const status = runRows[0]?.status;
      if (inPull) out.push(`${tag}: also pulled ${inPull}x`);
      if (status === "completed" && asRun !== 1) out.push(`${tag}: completed but runner saw it ${asRun}x`);
      if (status !== "completed" && status !== "cancelled") out.push(`${tag}: run ended ${status}`);
      if (asRun > 1) out.push(`${tag}: runner called ${asRun}x`);
    } else if (disposition === "steered") {
      // One outcome per claim, the first the claim ingress answered with; each drop but the last led to another claim.
      const seq = outcomes.map((o) => `${o.event_type}@${o.run_id}`);
      const runs = outcomes.map((o) => o.run_id);
      const last = outcomes.at(-1);
      if (!last || runs[0] !== run_id || new Set(runs).size !== runs.length || outcomes.slice(0, -1).some((o) => o.event_type !== "steering.dropped")) out.push(`${tag}: steering outcomes ${seq.join(",") || "none"}`);
      else if (last.event_type === "steering.injected") {
        if (ev.disposition !== "steered" || ev.run_id !== last.run_id) out.push(`${tag}: injected by ${last.run_id}, GET says ${ev.disposition} ${ev.run_id}`);
        if (inPull !== 1 || asRun || runRows.length) out.push(`${tag}: injected but pulled ${inPull}x, ran ${asRun}x, own run rows ${JSON.stringify(runRows)}`);
      } else if (ev.disposition === "bound") {
        // Dropped, then decided anew into a run of its own.
        const status = runRows[0]?.status;
        if (runRows.length !== 1 || runRows[0].run_id !== ev.run_id) out.push(`${tag}: bound to ${ev.run_id}, own run rows ${JSON.stringify(runRows)}`);
        if (inPull || asRun > 1 || (status === "completed" && asRun !== 1) || (status !== "completed" && status !== "cancelled")) out.push(`${tag}: own run ${status} after its drop, ran ${asRun}x, pulled ${inPull}x`);
      } else if (ev.disposition === "steered") {
        // Dropped for good: its claiming run was stopped by an interrupt (without one, it was never decided anew).
        if (!moots) out.push(`${tag}: dropped by ${last.run_id}, never decided anew`);
        if (ev.run_id !== last.run_id || inPull || asRun || runRows.length) out.push(`${tag}: dropped by ${last.run_id}, GET says steered ${ev.run_id}, pulled ${inPull}x, ran ${asRun}x`);
      } else if (ev.disposition !== "rejected" || inPull || asRun || runRows.length) out.push(`${tag}: dropped, then GET says ${ev.disposition} ${ev.run_id}, pulled ${inPull}x, ran ${asRun}x`);
    } else if (disposition === "rejected") {
      if (ev.disposition !== "rejected" || (ev.run_id ?? null) !== null) out.push(`${tag}: GET says ${ev.disposition} ${ev.run_id}`);
      if (outcomes.length || runRows.length || asRun || inPull) out.push(`${tag}: rejected yet ${JSON.stringify({ outcomes, runRows, asRun, inPull })}`);
    } else out.push(`${tag}: unexpected disposition`);
  }
  return out;
}

/** The conversation's EventLog as the operator pages it: each event once, with the disposition GET gives, and its steering outcome. */
async function listingViolations(c: string, posts: Post[], thread?: string): Promise<string[]> {
  const items: any[] = [];
  let cursor: string | undefined;
  do {
    const q = new URLSearchParams({ conversation_id: c, limit: "200", ...(thread ? { thread_id: thread } : {}), ...(cursor ? { cursor } : {}) });
    const page = (await host.admin("GET", `/v1/conversations/events?${q}`)).body;
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  const out: string[] = [];
  for (const p of posts) {
    const own = items.filter((i) => i.event_id === p.eventId);
    const ev = (await host.admin("GET", `/v1/events/${p.eventId}`)).body;
    if (own.length !== 1 || own[0].disposition !== ev.disposition || own[0].run_id !== ev.run_id) out.push(`${p.text}: listed ${JSON.stringify(own.map((o) => [o.disposition, o.run_id]))}`);
    const outcomes = items.filter((i) => i.event_type.startsWith("steering.") && i.data?.source_event_id === p.eventId);
    const recorded = await host.query("SELECT 1 FROM event_log WHERE event_type LIKE 'steering.%' AND json_extract(data_json, '$.source_event_id') = ?", [p.eventId]);
    if (outcomes.length !== recorded.length || (p.answer.body.disposition === "steered") !== outcomes.length > 0) out.push(`${p.text}: listed outcomes ${outcomes.length}`);
  }
  return out;
}

const ENDED = ["completed", "failed", "cancelled", "timeout"];

/**
 * The events whose fate is still open: bound to a run not ended, claimed by a run whose outcome for it is not recorded
 * yet, or dropped and still to be decided anew (`moots`: an interrupt's drop is for good, as when its run was
 * cancelled). Read events, then outcomes, then runs: an event moving on between the reads shows as open, never as
 * settled.
 */
async function openFates(c: string, posts: Post[], moots: boolean): Promise<string[]> {
  const ids = posts.map((p) => p.eventId);
  const marks = ids.map(() => "?").join(",");
  const events = await host.query<{ event_id: string; disposition: string; run_id: string | null }>(`SELECT event_id, disposition, run_id FROM event_log WHERE event_id IN (${marks})`, ids);
  const outcomes = await host.query<{ event_type: string; run_id: string; source: string }>(
    `SELECT event_type, run_id, json_extract(data_json, '$.source_event_id') AS source FROM event_log WHERE event_type LIKE 'steering.%' AND json_extract(data_json, '$.source_event_id') IN (${marks})`,
    ids,
  );
  const runs = new Map((await host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = ?", [c])).map((r) => [r.run_id, r.status]));
  const open = [...runs].filter(([, status]) => !ENDED.includes(status)).map(([id, status]) => `run ${id} ${status}`);
  for (const ev of events) {
    if (ev.disposition === "bound" && !ENDED.includes(runs.get(ev.run_id!) ?? "")) open.push(`${ev.event_id}: its run ${ev.run_id} not ended`);
    if (ev.disposition !== "steered") continue;
    const outcome = outcomes.find((o) => o.source === ev.event_id && o.run_id === ev.run_id);
    if (!outcome) open.push(`${ev.event_id}: no outcome yet from ${ev.run_id}`);
    else if (outcome.event_type === "steering.dropped" && !(moots && runs.get(ev.run_id!) === "cancelled")) open.push(`${ev.event_id}: dropped by ${ev.run_id}, not decided anew yet`);
  }
  if (events.length < ids.length) open.push(`${ids.length - events.length} events not recorded`);
  return open;
}

/**
 * Until every event's fate is settled (see `openFates`), however long a loaded machine takes: a message dropped at a
 * run's end is recorded, then decided anew, after that run has ended (README "Steering"), each a few round trips. At
 * most 40 s: what is still open then is what `violations` reports.
 */
async function settled(c: string, posts: Post[], { moots = false } = {}): Promise<void> {
  const until = Date.now() + 40_000;
  while ((await openFates(c, posts, moots)).length && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
}

const burst = (c: string, n: number, prefix: string, extra: Record<string, unknown> = {}) =>
  Promise.all(
    Array.from({ length: n }, async (_, i): Promise<Post> => {
      const text = `${prefix}${i}`;
      const eventId = `${c}-${prefix}${i}`;
      const answer = (await host.postEvent(messageEvent(c, text, { event_id: eventId, ...extra }))) as Post["answer"];
      return { text, eventId, answer };
    }),
  );

async function holding(c: string, text = `hold-${c}`): Promise<Post> {
  const eventId = `${c}-first`;
  const answer = (await host.postEvent(messageEvent(c, text, { event_id: eventId }))) as Post["answer"];
  await waitFor(() => (runsStarted.get(c) ?? []).length === 1, 10_000, "the first run");
  return { text, eventId, answer };
}

describe("every event's fate under a concurrent burst", () => {
  it("steer, the active run pulling all in a loop: all 20 steered and injected once", async () => {
    const c = "f-steer-all";
    await agentFor(c, steerer, { pull: "all" });
    const first = await holding(c);
    const posts = await burst(c, 20, "sa");
    await new Promise((r) => setTimeout(r, 200));
    gate(c).resolve();
    await settled(c, [first, ...posts]);
    expect(posts.map((p) => p.answer.body.disposition)).toEqual(posts.map(() => "steered"));
    expect(await violations([first, ...posts])).toEqual([]);
  }, 60_000);

  it("steer, the run ending while the burst arrives (one-at-a-time pulls): each event has exactly one fate", async () => {
    const c = "f-steer-ending";
    await agentFor(c, steerer, { pull: "one" });
    const first = await holding(c);
    const pending = burst(c, 20, "se");
    setTimeout(() => gate(c).resolve(), 15);
    const posts = await pending;
    await settled(c, [first, ...posts]);
    expect(await violations([first, ...posts])).toEqual([]);
    expect(await listingViolations(c, [first, ...posts])).toEqual([]);
  }, 60_000);

  it("steer, a run that never pulls: all 20 dropped, each then answered once in a run of its own", async () => {
    const c = "f-steer-never";
    await agentFor(c, steerer, { pull: "never" });
    const first = await holding(c);
    const posts = await burst(c, 20, "sn");
    gate(c).resolve();
    await settled(c, [first, ...posts]);
    expect(await violations([first, ...posts])).toEqual([]);
    expect([...runsStarted.get(c)!].sort()).toEqual([first, ...posts].map((p) => p.text).sort());
  }, 60_000);

  it("steer, a run that never pulls, each drop slow to record (a loaded machine): each message still answered once", async () => {
    const c = "f-steer-slow-drops";
    await agentFor(c, steerer, { pull: "never" });
    const first = await holding(c);
    const posts = await burst(c, 3, "sw");
    // Each run's steering.dropped records held 1.5 s: the next of the chain of runs begins only once they are written.
    host.databaseOutage({ delayMs: 1_500, matching: "steering.dropped", queries: 3 });
    try {
      gate(c).resolve();
      await settled(c, [first, ...posts]);
    } finally {
      host.databaseOutage({ delayMs: 0, matching: "", queries: 0 });
    }
    expect(await violations([first, ...posts])).toEqual([]);
    expect([...runsStarted.get(c)!].sort()).toEqual([first, ...posts].map((p) => p.text).sort());
  }, 60_000);

  it("interrupt: 20 at once to a busy conversation, exactly one completes, each event its own run", async () => {
    const c = "f-interrupt";
    await agentFor(c, plain, { concurrency: { strategy: "interrupt" } });
    const first = await holding(c);
    const posts = await burst(c, 20, "in");
    await settled(c, [first, ...posts]);
    expect(await violations([first, ...posts])).toEqual([]);
    const rows = await host.query<{ status: string }>("SELECT status FROM run WHERE conversation_id = ?", [c]);
    expect(rows.filter((r) => r.status === "completed")).toHaveLength(1);
  }, 60_000);

  it("reject: 20 at once to a busy conversation, all rejected", async () => {
    const c = "f-reject";
    await agentFor(c, plain, { concurrency: { strategy: "reject" } });
    const first = await holding(c);
    const posts = await burst(c, 20, "rj");
    gate(c).resolve();
    await settled(c, [first, ...posts]);
    expect(posts.map((p) => p.answer.body.disposition)).toEqual(posts.map(() => "rejected"));
    expect(await violations([first, ...posts])).toEqual([]);
  }, 60_000);

  it("enqueue: 20 at once to a busy conversation, each runs once in turn", async () => {
    const c = "f-enqueue";
    await agentFor(c, plain, { concurrency: { strategy: "enqueue" } });
    const first = await holding(c);
    const posts = await burst(c, 20, "eq");
    gate(c).resolve();
    await settled(c, [first, ...posts]);
    expect(posts.map((p) => p.answer.body.disposition)).toEqual(posts.map(() => "queued"));
    expect(await violations([first, ...posts])).toEqual([]);
  }, 60_000);

  it("steer with debounce to an idle conversation: one run, every other event steered once", async () => {
    const c = "f-steer-debounce";
    // A window the whole burst fits in on a loaded machine (at 300 ms, capped at 1.2 s, a late post started a run of its own).
    await agentFor(c, steerer, { pull: "all", concurrency: { debounce_ms: 1_000, debounce_max_ms: 5_000 } });
    const posts = await burst(c, 20, "sd");
    await settled(c, posts);
    expect(posts.filter((p) => p.answer.body.disposition === "started")).toHaveLength(1);
    expect(await violations(posts)).toEqual([]);
  }, 60_000);

  it("steer to an idle conversation without debounce: each event one fate", async () => {
    const c = "f-steer-idle";
    await agentFor(c, steerer, { pull: "one" });
    const posts = await burst(c, 20, "si");
    await settled(c, posts);
    expect(await violations(posts)).toEqual([]);
  }, 60_000);

  it("threads: a burst to two threads of one busy conversation is steered only within its own thread", async () => {
    const c = "f-threads";
    await agentFor(c, steerer, { pull: "all" });
    const first = { text: "hold-t1", eventId: `${c}-first`, answer: (await host.postEvent(messageEvent(c, "hold-t1", { event_id: `${c}-first`, thread_id: "t1" }))) as Post["answer"] };
    await waitFor(() => (runsStarted.get(c) ?? []).length === 1, 10_000, "the first run");
    const [a, b] = await Promise.all([burst(c, 10, "ta", { thread_id: "t1" }), burst(c, 10, "tb", { thread_id: "t2" })]);
    await new Promise((r) => setTimeout(r, 200));
    gate(c).resolve();
    await settled(c, [first, ...a, ...b]);
    expect(a.map((p) => [p.answer.body.disposition, p.answer.body.run_id])).toEqual(a.map(() => ["steered", first.answer.body.run_id]));
    expect(b.filter((p) => p.answer.body.run_id === first.answer.body.run_id)).toEqual([]);
    expect(await violations([first, ...a, ...b])).toEqual([]);
    expect([...(await listingViolations(c, [first, ...a], "t1")), ...(await listingViolations(c, b, "t2"))]).toEqual([]);
  }, 60_000);
});

const putAgentAs = (c: string, runner: typeof plain, strategy: string, pull = "all") =>
  host.admin("PUT", `/v1/admin/agents/agent-${c}`, { name: c, runner_id: runner.runnerId(), runner_config: { pull }, event_types: ["message.received"], scope: { type: "conversation", id: c }, concurrency: { strategy } });

describe("more bursts", () => {
  it("steer, the runner pulling three at once in a loop: nothing is handed to it twice", async () => {
    const c = "g-double";
    await agentFor(c, steerer, { pull: "double" as any });
    const first = await holding(c);
    const posts = await burst(c, 20, "dp");
    await new Promise((r) => setTimeout(r, 200));
    gate(c).resolve();
    await settled(c, [first, ...posts]);
    expect(await violations([first, ...posts])).toEqual([]);
  }, 60_000);

  for (const strategy of ["interrupt", "enqueue", "parallel", "steer"]) {
    it(`the same event_id 20 times at once to a busy ${strategy} conversation, 4 rounds: one fate each`, async () => {
      const c = `g-dup-${strategy}`;
      await agentFor(c, strategy === "steer" ? steerer : plain, { pull: "all", concurrency: { strategy } });
      const first = await holding(c);
      const posts: Post[] = [];
      for (let round = 0; round < 4; round++) {
        const text = `${strategy}-d${round}`;
        const eventId = `${c}-${text}`;
        const copies = await Promise.all(Array.from({ length: 20 }, () => host.postEvent(messageEvent(c, text, { event_id: eventId }))));
        const firsts = copies.filter((a) => a.body.disposition !== "duplicate");
        const runIds = [...new Set(copies.map((a) => a.body.run_id))];
        expect({ firsts: firsts.length, runIds: runIds.length }).toEqual({ firsts: 1, runIds: 1 });
        posts.push({ text, eventId, answer: firsts[0] as Post["answer"] });
      }
      await new Promise((r) => setTimeout(r, 100));
      gate(c).resolve();
      await settled(c, [first, ...posts]);
      expect(await violations([first, ...posts])).toEqual([]);
    }, 60_000);
  }

  it("the agent's strategy edited back and forth during a burst: every event one fate", async () => {
    const c = "g-edit";
    await agentFor(c, steerer, { pull: "one", concurrency: { strategy: "enqueue" } });
    const first = await holding(c);
    const strategies = ["steer", "reject", "interrupt", "parallel", "enqueue", "steer"];
    const edits = (async () => {
      for (const s of strategies) {
        expect((await putAgentAs(c, steerer, s, "one")).status).toBe(200);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const posts = await burst(c, 30, "ed");
    await edits;
    await new Promise((r) => setTimeout(r, 100));
    gate(c).resolve();
    await settled(c, [first, ...posts], { moots: true });
    expect(await violations([first, ...posts], { moots: true })).toEqual([]);
  }, 60_000);
});
