import { describe, expect, it } from "vitest";
import { asWelcomeHead, JOIN_HOLD_MS, joinWelcome, welcomeRunFor } from "../../durable-objects/welcomes";
import { waitingRun, type StoredRun } from "../../durable-objects/scheduling";
import type { RunJob } from "../../src/run/job";
import { RunTableStore } from "../../durable-objects/run-table";
import { MemStorage } from "../support/mem-storage";
import { jsonByteLength } from "../../src/protocol/common";

/** A member's join: only what gathering reads is meaningful. */
function joinJob(runId: string, user: string, opts: { source?: string; agentId?: string } = {}): RunJob {
  const event = { event_id: `evt-${runId}`, event_type: "group.member_joined", source: opts.source ?? "slack", data: { inviter: "U42" } };
  // A partial job: gathering reads its event, actor and agent id, and waitingRun its debounce.
  return { runId, event, actor: { actor_type: "user", actor_id: user, actor_name: null, metadata: {} }, agent: { agentId: opts.agentId ?? "agent", concurrency: {} }, runner: { capabilities: {} } } as unknown as RunJob;
}

const head = (job: RunJob, waitMs: number, now: number): [string, StoredRun] => [`run:${job.runId}`, asWelcomeHead(waitingRun(job, "enqueue", now), waitMs, now)];
const joinable = () => true;

describe("Slack joins gathered into one welcome", () => {
  it("a Slack join's run waits JOIN_WAIT_MS; 0, or another platform's join, starts at once as before", () => {
    expect(head(joinJob("a", "U1"), 2_000, 10)[1]).toMatchObject({ notBefore: 2_010, job: { joined: { waitUntil: 2_010, holdUntil: 10 + JOIN_HOLD_MS, events: [] } } });
    for (const [job, waitMs] of [[joinJob("a", "U1"), 0], [joinJob("a", "U1", { source: "telegram" }), 2_000]] as const) {
      const [, run] = head(job, waitMs, 10);
      expect([run.notBefore, run.job.joined]).toEqual([10, undefined]);
    }
  });

  it("each join pushes the start back, never past the hold; another agent's join is not gathered", () => {
    let entry: readonly [string, StoredRun] = head(joinJob("a", "U1"), 2_000, 0);
    const store = (key: string, run: StoredRun) => (entry = [key, run]);
    const at = [1_000, 2_500, JOIN_HOLD_MS - 500];
    at.forEach((now, i) => {
      const job = joinJob(`j${i}`, `U${i + 2}`);
      expect(joinWelcome(welcomeRunFor([entry], job, joinable)!, job, 2_000, now, store)).toEqual({ disposition: "merged", runId: "a", metadata: { joined_with: "evt-a" } });
    });
    expect(entry[1].notBefore).toBe(JOIN_HOLD_MS);
    expect(entry[1].job.event.data).toMatchObject({ members_count: 4, members: ["U1", "U2", "U3", "U4"].map((id) => ({ actor_type: "user", actor_id: id, actor_name: null, metadata: {} })) });
    expect(welcomeRunFor([entry], joinJob("x", "U9", { agentId: "other" }), joinable)).toBeUndefined();
    // Begun (or being cancelled), it takes no more.
    expect(welcomeRunFor([entry], joinJob("y", "U9"), () => false)).toBeUndefined();
  });
});

describe("a welcome gathering joins, as its conversation's storage keeps it", () => {
  /** Storage counting what each write hands it, as JSON. */
  function countingStorage() {
    const storage = new MemStorage();
    const writes: number[] = [];
    const put = storage.put.bind(storage);
    storage.put = (key: string | Record<string, unknown>, value?: unknown) => (writes.push(JSON.stringify(value ?? key).length), put(key, value));
    // A partial DurableObjectStorage: RunTableStore lists, puts and deletes only.
    return { storage, writes, store: () => new RunTableStore(storage as unknown as DurableObjectStorage) };
  }
  async function gather(store: RunTableStore, key: string, members: number, from = 1) {
    for (let i = from; i < from + members; i++) {
      const job = joinJob(`j${i}`, `U${String(i).padStart(9, "0")}`);
      joinWelcome(welcomeRunFor(await store.entries(), job, joinable)!, job, 2_000, i, (k, run) => void store.put(k, run));
    }
    return (await store.entries()).find(([k]) => k === key)![1];
  }

  it("each join writes a little, not the whole list again; the next instance reads it whole (one stored whole by an earlier release too); its end leaves nothing", async () => {
    const { storage, writes, store } = countingStorage();
    const first = store();
    const [key, run] = head(joinJob("a", "U0"), 2_000, 0);
    await first.entries();
    await first.put(key, run);
    const gathered = await gather(first, key, 600);
    expect(gathered.job.event.data.members_count).toBe(601);
    // Each of the last joins writes under a tenth of the whole (over 60 KB by now).
    const whole = JSON.stringify(gathered).length;
    expect(whole).toBeGreaterThan(60_000);
    expect(Math.max(...writes.slice(-100))).toBeLessThan(whole / 10);

    const next = store();
    expect(await next.entries()).toEqual([[key, gathered]]);
    // It goes on gathering where the last instance left off.
    expect((await gather(next, key, 1, 601)).job.event.data.members_count).toBe(602);
    expect(await store().entries()).toEqual(await next.entries());
    await next.delete(key);
    expect([...storage.m.keys()]).toEqual([]);

    // One stored whole by an earlier release (one entry) is read whole, and its next join keeps every member.
    storage.m.set(key, structuredClone(gathered));
    const upgraded = store();
    expect(await upgraded.entries()).toEqual([[key, gathered]]);
    const joined = await gather(upgraded, key, 1, 601);
    expect(joined.job.event.data.members_count).toBe(602);
    expect(await store().entries()).toEqual([[key, joined]]);
  });
});

describe("a welcome's size as its joins come", () => {
  it("counts up to exactly the job's size as JSON: repeated members, names past ASCII, counts and times gaining digits; one stored without a size counted whole", () => {
    let entry: readonly [string, StoredRun] = head(joinJob("a", "U1"), 2_000, 0);
    const store = (key: string, run: StoredRun) => (entry = [key, run]);
    for (let i = 0; i < 250; i++) {
      // Every seventh a member listed already (joined, left and joined again); the others named in other scripts.
      const job = joinJob(`j${i}`, i % 7 === 3 ? "U1" : `U${i + 2}`);
      job.actor!.actor_name = `Zoë ${"🎉".repeat(i % 3)} ${i}`;
      joinWelcome(welcomeRunFor([entry], job, joinable)!, job, 2_000, i * 50, store);
      expect(entry[1].bytes).toBe(jsonByteLength(entry[1].job));
    }
    expect(entry[1].job.joined!.waitUntil).toBeGreaterThan(10_000);
    const { bytes: _, ...unsized } = entry[1];
    entry = [entry[0], unsized];
    const job = joinJob("last", "ULAST");
    joinWelcome(welcomeRunFor([entry], job, joinable)!, job, 2_000, 20_000, store);
    expect(entry[1].bytes).toBe(jsonByteLength(entry[1].job));
  });
});
