import { describe, expect, it } from "vitest";
import { UnhandedRuns } from "../../durable-objects/unhanded-runs";
import type { RunJob } from "../../src/run/job";
import type { LiveHub } from "../../src/run/live";
import { MemStorage } from "../support/mem-storage";

const HOUR = 60 * 60_000;
const tick = () => new Promise((r) => setTimeout(r, 0));
// Only its run id is read by a hand-over that finds nothing ended under it.
const job = (runId: string) => ({ runId }) as unknown as RunJob;

describe("runs ended before their hand-over (remembered in the object's storage)", () => {
  it("a conversation that went quiet after one such end is cleared by the next instance's first hand-over", async () => {
    const storage = new MemStorage();
    storage.m.set("unhanded-ended:run_old", { at: Date.now() - 2 * HOUR, status: "cancelled" });
    storage.m.set("unhanded-ended:run_recent", { at: Date.now() - 60_000, status: "cancelled" });
    const noticed: string[] = [];
    const next = new UnhandedRuns(storage as unknown as DurableObjectStorage, {} as LiveHub, (j) => noticed.push(j.runId));

    expect(await next.lateHandOver(job("run_new"))).toBeNull();
    await tick();
    expect([...storage.m.keys()]).toEqual(["unhanded-ended:run_recent"]);
    // The recent one is still refused (its late hand-over gets `queued`, its placeholder the cancel notice).
    expect(await next.lateHandOver(job("run_recent"))).toEqual({ disposition: "queued", runId: "run_recent" });
    expect(noticed).toEqual(["run_recent"]);
  });
});
