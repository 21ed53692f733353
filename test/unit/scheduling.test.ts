import { describe, expect, it } from "vitest";
import { slidWindow } from "../../durable-objects/debounce";
import { ArrivalKeys, idleWakeAt, nextWakeAt, startable, steeringTarget, supersededByInterrupt, type RunTable, type StartRule, type StoredRun } from "../../durable-objects/scheduling";
import { strategyOf } from "../../src/run/job";
import { ChangeSignal } from "../../durable-objects/change-signal";
import { SerialDecisions } from "../../durable-objects/serial-decisions";
import type { RunJob } from "../../src/run/job";

type JobOpts = { steering?: boolean; strategy?: RunJob["agent"]["concurrency"]["strategy"]; agentId?: string; eventType?: string; album?: string; messageId?: number; source?: string; data?: Record<string, unknown>; eventTime?: string };
const job = (runId: string, opts: JobOpts = {}) =>
  // Only the fields scheduling reads are meaningful; the rest of a job does not matter here.
  ({
    runId,
    event: { source: opts.source ?? "telegram", event_type: opts.eventType ?? "message.received", event_time: opts.eventTime, data: { ...(opts.album ? { media_group_id: opts.album } : {}), ...(opts.messageId ? { message_id: opts.messageId } : {}), ...opts.data } },
    runner: { capabilities: { steering: opts.steering } },
    agent: { agentId: opts.agentId ?? "agent", concurrency: { strategy: opts.strategy } },
  }) as unknown as RunJob;

const row = (runId: string, state: StoredRun["state"], start: StartRule, notBefore = 0, steering = false, agentId = "agent", eventType?: string): [string, StoredRun] => [
  `run:${runId}`,
  { job: job(runId, { steering, agentId, eventType }), state, start, notBefore },
];
/** The interrupting event, of the agent "agent". */
const newer = job("new");
const none = () => false;
const keys = (xs: RunTable) => xs.map(([k]) => k);

describe("scheduling", () => {
  it("defaults to steer for a steering runner and enqueue otherwise; an explicit strategy wins", () => {
    expect(strategyOf(job("a", { steering: true }))).toBe("steer");
    expect(strategyOf(job("a"))).toBe("enqueue");
    expect(strategyOf(job("a", { steering: true, strategy: "parallel" }))).toBe("parallel");
  });

  it("keys runs by arrival: in call order within a millisecond and when the clock steps back", () => {
    const arrivals = new ArrivalKeys();
    const made = [arrivals.next("zzz", 1_000), arrivals.next("aaa", 1_000), arrivals.next("mmm", 999), arrivals.next("bbb", 1_001)];
    expect([...made].sort()).toEqual(made);
    // A fresh instance (counter at 0) whose clock is behind the stored keys still sorts after them.
    const restarted = new ArrivalKeys().next("aaa", 500, made.at(-1));
    expect(restarted > made.at(-1)!).toBe(true);
    expect(new ArrivalKeys().next("aaa", 500, "run:000000000000400:abc")).toMatch(/^run:000000000000500:/);
  });

  it("wakes an idle scheduler at once for runs left over, else at the first debounce or drop retry, else never", () => {
    const waiting: RunTable = [row("a", "queued", "after-all", 50)];
    expect(idleWakeAt([], 10, false, null)).toBeNull();
    expect(idleWakeAt([], 10, false, 5_010)).toBe(5_010);
    expect(idleWakeAt(waiting, 10, false, null)).toBe(50);
    expect(idleWakeAt(waiting, 10, false, 30)).toBe(30);
    expect(idleWakeAt(waiting, 10, true, 30)).toBe(10);
    expect(idleWakeAt([row("a", "queued", "after-all")], 10, false, 5_010)).toBe(10);
  });

  it("starts enqueued runs one at a time, in arrival order", () => {
    const table: RunTable = [row("a", "queued", "after-all"), row("b", "queued", "after-all")];
    expect(keys(startable(table, 10, none))).toEqual(["run:a"]);
    const running = (id: string) => id === "a";
    expect(keys(startable(table, 10, running))).toEqual([]);
  });

  it("starts parallel runs at once and interrupting runs once nothing runs", () => {
    const running = (id: string) => id === "a";
    const table: RunTable = [row("a", "running", "after-all"), row("p", "queued", "now"), row("i", "queued", "after-running")];
    expect(keys(startable(table, 10, running))).toEqual(["run:p"]);
    // Runs that take turns never start together: the first chosen counts as running for the rest. An interrupting
    // run waiting is next once nothing runs, ahead of runs that waited their turn before it (another agent's).
    expect(keys(startable([row("q", "queued", "after-all"), row("i", "queued", "after-running")], 10, none))).toEqual(["run:i"]);
    expect(keys(startable([row("a", "running", "after-all"), row("q", "queued", "after-all"), row("i", "queued", "after-running")], 10, (id) => id === "a"))).toEqual([]);
    expect(keys(startable([row("i2", "queued", "after-running"), row("i3", "queued", "after-running")], 10, none))).toEqual(["run:i2"]);
    expect(keys(startable([row("i", "queued", "after-running"), row("p", "queued", "now")], 10, none))).toEqual(["run:i", "run:p"]);
    // A debounced run ahead does not start while a later interrupting run is running.
    expect(keys(startable([row("d", "queued", "after-all", 5), row("i", "running", "after-running")], 10, (id) => id === "i"))).toEqual([]);
  });

  it("has an interrupt supersede the runs answered started but not executing yet (debouncing too), and older interrupting runs; not parallel runs or later turns", () => {
    // q is due now (its alarm still to come); q2 waits its turn behind it; d is debounced behind them; p is parallel; i is an older interrupting run.
    const table: RunTable = [row("q", "queued", "after-all"), row("q2", "queued", "after-all"), row("d", "queued", "after-all", 50), row("p", "queued", "now"), row("i", "queued", "after-running")];
    // An interrupting run waiting makes it next: the one it supersedes, with q not due any more.
    expect(keys(supersededByInterrupt(table, newer, 10, none))).toEqual(["run:i"]);
    expect(keys(supersededByInterrupt(table.slice(0, 4), newer, 10, none))).toEqual(["run:q"]);
    // Executing already, it is aborted, not cancelled as queued.
    expect(keys(supersededByInterrupt([row("q", "queued", "after-all")], newer, 10, (id) => id === "q"))).toEqual([]);
    // First in line but still in its debounce window, it was answered "started" all the same: superseded too.
    const answered = (r: [string, StoredRun], a: StoredRun["answered"]): [string, StoredRun] => [r[0], { ...r[1], answered: a }];
    expect(keys(supersededByInterrupt([answered(row("d", "queued", "after-all", 50), "started"), row("q2", "queued", "after-all"), row("p", "queued", "now")], newer, 10, none))).toEqual(["run:d"]);
    // Answered "queued" (it waited behind a run that has ended since), still in its debounce window: it waits its turn.
    expect(keys(supersededByInterrupt([answered(row("d", "queued", "after-all", 50), "queued"), row("q2", "queued", "after-all")], newer, 10, none))).toEqual([]);
    // Only its own agent's runs answering something asked: not another agent's, nor a notification's (a join).
    expect(keys(supersededByInterrupt([answered(row("o", "queued", "after-all", 50, false, "other"), "started")], newer, 10, none))).toEqual([]);
    expect(keys(supersededByInterrupt([answered(row("j", "queued", "after-all", 50, false, "agent", "group.member_joined"), "started")], newer, 10, none))).toEqual([]);
    // An album's item too late to join its run is part of the message that run answers: it supersedes no run of its album, only another.
    const ofAlbum = (r: [string, StoredRun], album: string): [string, StoredRun] => [r[0], { ...r[1], job: job(r[1].job.runId, { album }) }];
    const late = job("late", { album: "g1" });
    expect(keys(supersededByInterrupt([ofAlbum(answered(row("a", "queued", "after-running", 50), "started"), "g1")], late, 10, none))).toEqual([]);
    expect(keys(supersededByInterrupt([ofAlbum(answered(row("b", "queued", "after-running", 50), "started"), "g2")], late, 10, none))).toEqual(["run:b"]);
    expect(keys(supersededByInterrupt([ofAlbum(answered(row("a", "queued", "after-running", 50), "started"), "g1")], newer, 10, none))).toEqual(["run:a"]);
    // Nor the run of a message sent after its album (Telegram numbers a chat's messages), which reached the conversation first; one sent before, it does.
    const sent = (r: [string, StoredRun], messageId: number): [string, StoredRun] => [r[0], { ...r[1], job: job(r[1].job.runId, { messageId }) }];
    const straggler = job("straggler", { album: "g1", messageId: 11 });
    expect(keys(supersededByInterrupt([sent(answered(row("m", "queued", "after-running", 50), "started"), 12)], straggler, 10, none))).toEqual([]);
    expect(keys(supersededByInterrupt([sent(answered(row("m", "queued", "after-running", 50), "started"), 10)], straggler, 10, none))).toEqual(["run:m"]);
  });

  it("has an interrupt never supersede the run of a message sent after its own, by the platform's order of the chat; an API event has none", () => {
    const waitingFor = (of: RunJob): [string, StoredRun] => [`run:${of.runId}`, { job: of, state: "queued", start: "after-running", notBefore: 50, answered: "started" }];
    const superseded = (run: RunJob, by: RunJob) => keys(supersededByInterrupt([waitingFor(run)], by, 10, none)).length === 1;
    // [sent first, sent second] on each platform: the first reaching the conversation last (its files slow to download)
    // supersedes nothing; the second, reaching it last as usual, supersedes the first.
    const pairs: [string, RunJob, RunJob][] = [
      ["telegram", job("t1", { messageId: 11 }), job("t2", { messageId: 12 })],
      ["slack", job("s1", { source: "slack", data: { ts: "1700000000.000900" } }), job("s2", { source: "slack", data: { ts: "1700000000.001000" } })],
      ["slack, the seconds first", job("s1", { source: "slack", data: { ts: "1700000000.900000" } }), job("s2", { source: "slack", data: { ts: "1700000001.000000" } })],
      ["discord", job("d1", { source: "discord", data: { interaction_id: "999999999999999999" } }), job("d2", { source: "discord", data: { interaction_id: "1000000000000000000" } })],
      ["lark", job("l1", { source: "lark", eventTime: "2026-01-02T03:04:05.006Z" }), job("l2", { source: "lark", eventTime: "2026-01-02T03:04:05.007Z" })],
    ];
    for (const [platform, first, second] of pairs) expect([platform, superseded(second, first), superseded(first, second)]).toEqual([platform, false, true]);
    // An album sent after the message is no different (an item of another album, as the straggler above, neither).
    expect([superseded(job("g2", { album: "g", messageId: 12 }), job("t1", { messageId: 11 })), superseded(job("g2", { album: "g", messageId: 12 }), job("h1", { album: "h", messageId: 11 }))]).toEqual([false, false]);
    // No order to go by: API events (whatever their data says), events of another source, a tie, an id unreadable.
    const api = (runId: string, messageId: number) => job(runId, { source: "api", messageId, eventTime: "2026-01-02T03:04:05.006Z" });
    expect([superseded(api("a2", 12), api("a1", 11)), superseded(job("t2", { messageId: 12 }), api("a1", 11))]).toEqual([true, true]);
    expect(superseded(job("l2", { source: "lark", eventTime: "2026-01-02T03:04:05.006Z" }), job("l1", { source: "lark", eventTime: "2026-01-02T03:04:05.006Z" }))).toBe(true);
    expect(superseded(job("s2", { source: "slack", data: { ts: "soon" } }), job("s1", { source: "slack", data: { ts: "1700000000.000900" } }))).toBe(true);
  });

  it("has an interrupting run wait for a run answered started before it came, which it did not supersede", () => {
    const started = (r: [string, StoredRun]): [string, StoredRun] => [r[0], { ...r[1], answered: "started" }];
    expect(keys(startable([started(row("o", "queued", "after-all", 50)), row("i", "queued", "after-running")], 10, none))).toEqual([]);
    expect(keys(startable([started(row("o", "queued", "after-all", 50)), row("i", "queued", "after-running")], 50, none))).toEqual(["run:o"]);
    // Answered queued, it is overtaken.
    expect(keys(startable([row("q", "queued", "after-all"), row("i", "queued", "after-running")], 10, none))).toEqual(["run:i"]);
    // Another agent's interrupting run before it, still in its debounce window (answered started, or queued behind a
    // run since ended): the new one was answered queued behind it, and waits for it.
    for (const a of ["started", "queued"] as const) {
      const other: [string, StoredRun] = [`run:o`, { ...row("o", "queued", "after-running", 50, false, "other")[1], answered: a }];
      expect(keys(startable([other, row("i", "queued", "after-running")], 10, none))).toEqual([]);
      expect(keys(startable([other, row("i", "queued", "after-running")], 50, none))).toEqual(["run:o"]);
    }
  });

  it("slides a debounce window by each message claimed, up to its limit, and not once the window is over", () => {
    const waiting: StoredRun = { ...row("d", "queued", "after-all", 1_000)[1], waitLimit: 2_000 };
    expect(slidWindow(waiting, 500, 1_000)?.notBefore).toBe(1_500);
    expect(slidWindow(waiting, 900, 1_500)?.notBefore).toBe(2_000);
    expect(slidWindow({ ...waiting, notBefore: 2_000 }, 1_900, 1_000)).toBeNull();
    expect(slidWindow(waiting, 1_000, 1_000)).toBeNull();
    expect(slidWindow({ ...waiting, waitLimit: undefined }, 500, 1_000)).toBeNull();
  });

  it("holds a debounced run until its time", () => {
    const table: RunTable = [row("a", "queued", "after-all", 100)];
    expect(startable(table, 99, none)).toEqual([]);
    expect(keys(startable(table, 100, none))).toEqual(["run:a"]);
  });

  it("lets parallel runs take no turn: they neither wait for the others nor are waited for", () => {
    const p = (id: string) => id === "p";
    // A queued run whose turn has come starts beside a parallel run stored after it, or before it.
    expect(keys(startable([row("q", "queued", "after-all"), row("p", "running", "now")], 10, p))).toEqual(["run:q"]);
    expect(keys(startable([row("p", "running", "now"), row("q", "queued", "after-all")], 10, p))).toEqual(["run:q"]);
    expect(keys(startable([row("p", "running", "now"), row("i", "queued", "after-running")], 10, p))).toEqual(["run:i"]);
    // Runs that take turns still take them among themselves.
    expect(keys(startable([row("p", "running", "now"), row("a", "queued", "after-all"), row("b", "queued", "after-all")], 10, p))).toEqual(["run:a"]);
  });

  it("claims for the oldest active run of the same agent, counting a debouncing run, only when it steers", () => {
    const running = (id: string) => id === "b";
    const runs = (isRunning: (id: string) => boolean, steers = (r: StoredRun) => r.job.runner.capabilities.steering === true, excluded = (_id: string) => false) => ({ running: isRunning, steers, excluded });
    expect(steeringTarget([row("b", "running", "after-all", 0, true), row("c", "running", "now", 0, true)], "agent", runs((id) => id !== "x"))?.job.runId).toBe("b");
    expect(steeringTarget([row("a", "queued", "after-all", 50, true)], "agent", runs(none))?.job.runId).toBe("a");
    expect(steeringTarget([row("b", "running", "after-all", 0, false)], "agent", runs(running))).toBeUndefined();
    // A run waiting its turn (not debouncing, not running) takes the message, ahead of a running one: the message comes after its own.
    expect(steeringTarget([row("b", "running", "after-all", 0, false), row("q", "queued", "after-all", 0, true)], "agent", runs(running))?.job.runId).toBe("q");
    expect(steeringTarget([row("b", "running", "after-all", 0, true), row("q", "queued", "after-all", 0, true), row("r", "queued", "after-all", 0, true)], "agent", runs(running))?.job.runId).toBe("r");
    // The newest waiting run cannot pull: the message is not handed to the running one ahead of it.
    expect(steeringTarget([row("b", "running", "after-all", 0, true), row("q", "queued", "after-all", 0, false)], "agent", runs(running))).toBeUndefined();
    // A run in its debounce window takes the burst even while another agent's run holds the conversation.
    expect(steeringTarget([row("w", "running", "after-all", 0, true, "other"), row("a", "queued", "after-all", 50, true)], "agent", runs((id) => id === "w"))?.job.runId).toBe("a");
    // A stored "running" entry this instance does not execute is an orphan, not a target.
    expect(steeringTarget([row("o", "running", "after-all", 0, true)], "agent", runs(none))).toBeUndefined();
    // Another agent's run never receives the message, and does not hide this agent's own active run.
    expect(steeringTarget([row("b", "running", "after-all", 0, true, "other")], "agent", runs(running))).toBeUndefined();
    expect(steeringTarget([row("b", "running", "now", 0, true, "other"), row("c", "running", "after-all", 0, true)], "agent", runs(() => true))?.job.runId).toBe("c");
    // A run being cancelled is not active; one whose snapshot cannot pull is not a target.
    expect(steeringTarget([row("b", "running", "after-all", 0, true)], "agent", runs(running, undefined, (id) => id === "b"))).toBeUndefined();
    expect(steeringTarget([row("b", "running", "after-all", 0, true)], "agent", runs(running, () => false))).toBeUndefined();
  });
});

describe("SerialDecisions", () => {
  it("takes decisions one at a time in arrival order, shares a repeat's, and goes on after a failure", async () => {
    const decisions = new SerialDecisions<string>();
    const log: string[] = [];
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    const a = decisions.decide("a", async () => (log.push("a start"), await slow, log.push("a end"), "A"));
    const failing = decisions.decide("f", async () => {
      log.push("f");
      throw new Error("refused");
    });
    const b = decisions.decide("b", async () => (log.push("b"), "B"));
    const aAgain = decisions.decide("a", async () => (log.push("a twice"), "A2"));
    await Promise.resolve();
    expect(log).toEqual(["a start"]);
    release();
    expect(await Promise.all([a, aAgain, b])).toEqual(["A", "A", "B"]);
    await expect(failing).rejects.toThrow("refused");
    expect(log).toEqual(["a start", "a end", "f", "b"]);
    // Waiting for a decision: none pending resolves at once; a failed one still resolves.
    await decisions.settled("nothing");
    const late = decisions.decide("late", async () => {
      throw new Error("refused");
    });
    await decisions.settled("late");
    await expect(late).rejects.toThrow("refused");
  });
});

describe("nextWakeAt", () => {
  it("is the first time a stored run waits for: a debounce, or a lost run's pause", () => {
    const table: RunTable = [row("a", "running", "after-all", 900), row("b", "queued", "after-all", 500), row("c", "queued", "after-all", 300), row("d", "queued", "after-all", 50)];
    expect(nextWakeAt(table, 100)).toBe(300);
    expect(nextWakeAt(table, 600)).toBe(900);
    expect(nextWakeAt(table, 1000)).toBeUndefined();
  });

  it("is the retry of drops waiting when that comes first, whatever runs", () => {
    const table: RunTable = [row("a", "running", "now", 0), row("b", "queued", "after-all", 5_000)];
    expect(nextWakeAt(table, 100, 3_000)).toBe(3_000);
    expect(nextWakeAt(table, 100, 8_000)).toBe(5_000);
    expect(nextWakeAt([row("a", "running", "now", 0)], 100, 5_100)).toBe(5_100);
  });
});

describe("ChangeSignal", () => {
  it("wakes a waiting scheduler on a change, returns at once for a change not yet seen, and wakes at the asked time", async () => {
    const changes = new ChangeSignal();
    let woke = false;
    const waiting = changes.next().then(() => (woke = true));
    await Promise.resolve();
    expect(woke).toBe(false);
    changes.notify();
    await waiting;
    // Not seen yet: the next wait returns at once; once seen, it waits again, here until its time.
    await changes.next();
    changes.seen();
    const t0 = Date.now();
    await changes.next(t0 + 30);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(25);
  });
});
