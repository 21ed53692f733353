import { describe, expect, it } from "vitest";
import { startable, steeringTarget, strategyOf, type RunTable, type StartRule, type StoredRun } from "../../durable-objects/scheduling";
import type { RunJob } from "../../src/run/job";

const job = (runId: string, opts: { steering?: boolean; strategy?: RunJob["agent"]["concurrency"]["strategy"] } = {}) =>
  // Only the fields scheduling reads are meaningful; the rest of a job does not matter here.
  ({ runId, runner: { capabilities: { steering: opts.steering } }, agent: { concurrency: { strategy: opts.strategy } } }) as unknown as RunJob;

const row = (runId: string, state: StoredRun["state"], start: StartRule, notBefore = 0, steering = false): [string, StoredRun] => [
  `run:${runId}`,
  { job: job(runId, { steering }), state, start, notBefore },
];
const none = () => false;
const keys = (xs: [string, StoredRun][]) => xs.map(([k]) => k);

describe("scheduling", () => {
  it("defaults to steer for a steering runner and enqueue otherwise; an explicit strategy wins", () => {
    expect(strategyOf(job("a", { steering: true }))).toBe("steer");
    expect(strategyOf(job("a"))).toBe("enqueue");
    expect(strategyOf(job("a", { steering: true, strategy: "parallel" }))).toBe("parallel");
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
    expect(keys(startable([row("q", "queued", "after-all"), row("i", "queued", "after-running")], 10, none))).toEqual(["run:q", "run:i"]);
  });

  it("holds a debounced run until its time", () => {
    const table: RunTable = [row("a", "queued", "after-all", 100)];
    expect(startable(table, 99, none)).toEqual([]);
    expect(keys(startable(table, 100, none))).toEqual(["run:a"]);
  });

  it("claims for the oldest active run, counting a debouncing run, only when its runner steers", () => {
    const running = (id: string) => id === "b";
    expect(steeringTarget([row("b", "running", "after-all", 0, true), row("c", "running", "now", 0, true)], 10, (id) => id !== "x")?.job.runId).toBe("b");
    expect(steeringTarget([row("a", "queued", "after-all", 50, true)], 10, none)?.job.runId).toBe("a");
    expect(steeringTarget([row("b", "running", "after-all", 0, false)], 10, running)).toBeUndefined();
    // A run waiting its turn (not debouncing, not running) is not active.
    expect(steeringTarget([row("b", "running", "after-all", 0, false), row("q", "queued", "after-all", 0, true)], 10, running)).toBeUndefined();
    // A stored "running" entry this instance does not execute is an orphan, not a target.
    expect(steeringTarget([row("o", "running", "after-all", 0, true)], 10, none)).toBeUndefined();
  });
});
