import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { waitFor } from "../support/fake-platform";
import { messageEvent, readSse, type TestHost } from "../support/host";
import type { RunCall } from "../support/runner";

/**
 * Bursts: the same event_id posted at once (every answer names what the event ended up with, even when steering or
 * a rejection discarded its run meanwhile), many events to one conversation or many at once, by strategy, with
 * followers and cancels racing them. One run per event, one at a time where runs take turns, gapless ledgers.
 */
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
let steerer: typeof setup.steerer;
let plain: typeof setup.plain;
const gate = (conversation: string) => setup.gate(conversation);
const agentFor = (...args: Parameters<typeof setup.agentFor>) => setup.agentFor(...args);
const started = new Map<string, string[]>();
/** Runs in progress per conversation, and the most seen at once. */
const inFlight = new Map<string, number>();
const maxInFlight = new Map<string, number>();
const pulledBy = new Map<string, string[]>();

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, conversation, text, api } = runOf(call, res);
  started.set(conversation, [...(started.get(conversation) ?? []), text]);
  const n = (inFlight.get(conversation) ?? 0) + 1;
  inFlight.set(conversation, n);
  maxInFlight.set(conversation, Math.max(maxInFlight.get(conversation) ?? 0, n));
  try {
    if (text.startsWith("hold")) await gate(conversation).promise;
    else await new Promise((r) => setTimeout(r, 5));
    const pulled: any[] = [];
    if (ctx.config.pull === "all") pulled.push(...((await api("steering.pull")).body.data?.items ?? []));
    pulledBy.set(ctx.run_id, pulled.map((i) => i.input.text));
    w.send("message.delta", { chunk: { role: "assistant", content: "re: " } });
    w.reply(`re: ${text}`);
  } finally {
    inFlight.set(conversation, (inFlight.get(conversation) ?? 1) - 1);
  }
}

beforeAll(async () => {
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: { events: ["get", "page"], history: ["page"] } }]);
  ({ host, steerer, plain } = setup);
});
afterAll(async () => {
  await setup?.dispose();
});

describe("the same event_id posted concurrently", () => {
  it("to a conversation whose steering run is active: every answer names the claiming run, and the message is pulled once", async () => {
    const c = "dup-steer";
    await agentFor(c, steerer, { pull: "all" });
    const first = await host.postEvent(messageEvent(c, "hold first"));
    await waitFor(() => (started.get(c) ?? []).length === 1, 10_000, "the first run");
    const answers: any[] = [];
    for (let round = 0; round < 5; round++) {
      const id = `dup-steer-${round}`;
      const copies = await Promise.all(Array.from({ length: 20 }, () => host.postEvent(messageEvent(c, `again ${round}`, { event_id: id }))));
      answers.push(...copies.map((a) => ({ id, status: a.status, ...a.body })));
    }
    // Every answer (the first's steered, the repeats' duplicate) names the run that claimed the event.
    const wrong = answers.filter((a) => a.run_id !== first.body.run_id);
    gate(c).resolve();
    await host.waitForRun(first.body.run_id!);
    const pulled = pulledBy.get(first.body.run_id!) ?? [];
    const events = await host.query<{ event_type: string; n: number }>(
      "SELECT event_type, count(*) AS n FROM event_log WHERE conversation_id = ? AND event_type LIKE 'steering.%' GROUP BY event_type",
      [c],
    );
    expect({ wrong, pulled: [...pulled].sort(), events }).toEqual({
      wrong: [],
      pulled: ["again 0", "again 1", "again 2", "again 3", "again 4"],
      events: [{ event_type: "steering.injected", n: 5 }],
    });
  }, 60_000);

  it("to an idle conversation: one run, every answer names it, the runner is called once", async () => {
    const c = "dup-idle";
    await agentFor(c, plain);
    const results: { id: string; runIds: (string | null)[]; dispositions: string[] }[] = [];
    for (let round = 0; round < 5; round++) {
      const id = `dup-idle-${round}`;
      const copies = await Promise.all(Array.from({ length: 20 }, () => host.postEvent(messageEvent(c, `m${round}`, { event_id: id }))));
      results.push({ id, runIds: [...new Set(copies.map((a) => a.body.run_id))], dispositions: copies.map((a) => a.body.disposition) });
    }
    for (const r of results) {
      expect(r.runIds).toHaveLength(1);
      expect(r.dispositions.filter((d) => d !== "duplicate")).toHaveLength(1);
      expect((await host.waitForRun(r.runIds[0]!)).status).toBe("completed");
    }
    expect((started.get(c) ?? []).sort()).toEqual(["m0", "m1", "m2", "m3", "m4"]);
    const runs = await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ?", [c]);
    expect(runs[0].n).toBe(5);
  }, 60_000);
});

describe("many events at once", () => {
  it("30 distinct events to one enqueue conversation: one run at a time, every run ends completed, transcript complete, ledgers gapless", async () => {
    const c = "burst-enqueue";
    await agentFor(c, plain);
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => host.postEvent(messageEvent(c, `b${i}`))));
    expect(answers.filter((a) => a.body.disposition === "started").length).toBeGreaterThanOrEqual(1);
    const ends = await Promise.all(answers.map((a) => host.waitForRun(a.body.run_id!, 60_000)));
    expect(ends.map((r) => r.status).filter((s) => s !== "completed")).toEqual([]);
    expect(maxInFlight.get(c)).toBe(1);
    expect(started.get(c)).toHaveLength(30);
    const items = await host.query<{ role: string; seq: number; content: string }>("SELECT role, seq, content FROM transcript WHERE conversation_id = ? ORDER BY seq", [c]);
    expect(items.filter((i) => i.role === "user")).toHaveLength(30);
    expect(items.filter((i) => i.role === "assistant")).toHaveLength(30);
    expect(new Set(items.map((i) => i.seq)).size).toBe(items.length);
    // The runs started in the order their answers were decided: the one answered started first.
    const startedFirst = answers.find((a) => a.body.disposition === "started")!;
    expect(started.get(c)![0]).toBe(`b${answers.indexOf(startedFirst)}`);
    for (const a of answers) {
      const seqs = await host.query<{ seq: number }>("SELECT seq FROM run_event WHERE run_id = ? ORDER BY seq", [a.body.run_id!]);
      expect(seqs.map((s) => s.seq)).toEqual(seqs.map((_, i) => i + 1));
    }
  }, 120_000);

  it("50 events across 25 conversations at once all complete", async () => {
    const convs = Array.from({ length: 25 }, (_, i) => `spread-${i}`);
    const res = await host.admin("POST", "/v1/admin/agents", {
      agent_id: "agent-spread",
      name: "spread",
      runner_id: plain.runnerId(),
      runner_config: { pull: "never" },
      event_types: ["message.received"],
      scope: { type: "workspace", id: "ws-spread" },
    });
    expect(res.status).toBe(201);
    const answers = await Promise.all(convs.flatMap((c) => [0, 1].map((i) => host.postEvent(messageEvent(c, `${c}-${i}`, { workspace_id: "ws-spread" })))));
    const ends = await Promise.all(answers.map((a) => host.waitForRun(a.body.run_id!, 60_000)));
    expect(ends.map((r) => r.status).filter((s) => s !== "completed")).toEqual([]);
    for (const c of convs) expect(maxInFlight.get(c)).toBe(1);
  }, 120_000);
});

describe("reject and parallel under a burst", () => {
  it("the same event_id posted concurrently to a rejecting busy conversation: every answer names no run", async () => {
    const c = "dup-reject";
    await agentFor(c, plain, { concurrency: { strategy: "reject" } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => (started.get(c) ?? []).length === 1, 10_000, "the first run");
    const answers: any[] = [];
    for (let round = 0; round < 5; round++) {
      const copies = await Promise.all(Array.from({ length: 20 }, () => host.postEvent(messageEvent(c, `r${round}`, { event_id: `dup-reject-${round}` }))));
      answers.push(...copies.map((a) => a.body));
    }
    const named = answers.filter((a) => a.run_id !== null);
    const missing: string[] = [];
    for (const id of new Set(named.map((a) => a.run_id))) if ((await host.admin("GET", `/v1/runs/${id}`)).status === 404) missing.push(id);
    gate(c).resolve();
    await host.waitForRun(first.body.run_id!);
    expect({ named: named.length, missing: missing.length }).toEqual({ named: 0, missing: 0 });
  }, 60_000);

  it("20 distinct events at once to an idle rejecting conversation: one runs, the rest are rejected", async () => {
    const c = "burst-reject";
    await agentFor(c, plain, { concurrency: { strategy: "reject" } });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => host.postEvent(messageEvent(c, `hold ${i}`))));
    const dispositions = answers.map((a) => a.body.disposition);
    expect(dispositions.filter((d) => d === "started")).toHaveLength(1);
    expect(dispositions.filter((d) => d === "rejected")).toHaveLength(19);
    gate(c).resolve();
    const runId = answers.find((a) => a.body.disposition === "started")!.body.run_id!;
    expect((await host.waitForRun(runId)).status).toBe("completed");
    const runs = await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ?", [c]);
    expect(runs[0].n).toBe(1);
  }, 60_000);

  it("20 distinct events at once to a parallel conversation: all start at once and complete", async () => {
    const c = "burst-parallel";
    await agentFor(c, plain, { concurrency: { strategy: "parallel" } });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => host.postEvent(messageEvent(c, `hold ${i}`))));
    expect(answers.map((a) => a.body.disposition)).toEqual(answers.map(() => "started"));
    await waitFor(() => (inFlight.get(c) ?? 0) === 20, 15_000, "all 20 to run at once");
    gate(c).resolve();
    const ends = await Promise.all(answers.map((a) => host.waitForRun(a.body.run_id!)));
    expect(ends.map((r) => r.status)).toEqual(ends.map(() => "completed"));
  }, 60_000);
});

describe("followers of a burst", () => {
  it("SSE followers opened at once for 30 queued runs each get the whole ledger and the end", async () => {
    const c = "burst-follow";
    await agentFor(c, plain);
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => host.postEvent(messageEvent(c, `f${i}`))));
    const streams = await Promise.all(answers.map((a) => fetch(`${host.url}/v1/runs/${a.body.run_id}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } }).then(readSse)));
    for (const [i, s] of streams.entries()) {
      const ledger = (await host.admin("GET", `/v1/runs/${answers[i].body.run_id}/events?limit=1000`)).body.items.map((e: any) => e.seq);
      expect({ end: s.end, seqs: s.frames.map((f) => f.seq).sort((a, b) => a - b) }).toEqual({ end: "completed", seqs: ledger });
      expect(ledger).toEqual(ledger.map((_: number, j: number) => j + 1));
    }
  }, 120_000);
});

describe("debounced steering burst", () => {
  it("20 messages at once to a debounced steering agent: one run answers them all", async () => {
    const c = "burst-debounce";
    await agentFor(c, steerer, { pull: "all", concurrency: { debounce_ms: 800 } });
    // The run (whichever message starts it) pulls only once all are answered: on a loaded machine some POSTs of the
    // burst take longer than the window, and would find the run already past its pull, or over.
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => host.postEvent(messageEvent(c, `hold w${i}`))));
    gate(c).resolve();
    const startedOnes = answers.filter((a) => a.body.disposition === "started");
    expect(startedOnes).toHaveLength(1);
    const runId = startedOnes[0].body.run_id!;
    expect(answers.filter((a) => a.body.disposition === "steered" && a.body.run_id === runId)).toHaveLength(19);
    await host.waitForRun(runId);
    expect(started.get(c)).toHaveLength(1);
    expect(pulledBy.get(runId)).toHaveLength(19);
  }, 60_000);
});

describe("cancels racing a burst", () => {
  it("30 events at once, each cancelled twice concurrently as soon as answered: every run ends, one 202 at most per run", async () => {
    const c = "burst-cancel";
    await agentFor(c, plain);
    const answers = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const a = await host.postEvent(messageEvent(c, i === 0 ? "hold 0" : `k${i}`));
        const cancels = await Promise.all([0, 1].map(() => host.admin("POST", `/v1/runs/${a.body.run_id}/cancel`)));
        return { runId: a.body.run_id!, statuses: cancels.map((x) => x.status) };
      }),
    );
    gate(c).resolve();
    const ends = await Promise.all(answers.map((a) => host.waitForRun(a.runId)));
    for (const [i, a] of answers.entries()) {
      expect(a.statuses.filter((s) => s === 202).length).toBeLessThanOrEqual(1);
      if (a.statuses.includes(202)) expect(ends[i].status).toBe("cancelled");
    }
  }, 60_000);
});
