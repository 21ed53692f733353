import { describe, expect, it, vi } from "vitest";
import { SteeringQueue } from "../../durable-objects/steering-queue";
import { MemStorage } from "../support/mem-storage";
import { createDb } from "../../src/db/client";
import type { SqlExecutor, SqlQuery } from "../../src/db/executor";
import type { RunJob } from "../../src/run/job";

/** A database whose write batches are answered by the test, one by one. */
function scriptedDb() {
  const batches: { qs: SqlQuery[]; ok: (firstRows?: unknown[]) => void; fail: () => void }[] = [];
  const executor: SqlExecutor = {
    query: async () => ({ rows: [] }),
    batch: (qs) =>
      new Promise((resolve, reject) => {
        // `firstRows`: what the batch's first statement reads (a pull's check for recalled messages).
        batches.push({ qs, ok: (firstRows: unknown[] = []) => resolve(qs.map((_, i) => ({ rows: i ? [] : firstRows }))), fail: () => reject(new Error("database unavailable")) });
      }),
  };
  return { db: createDb(executor), batches };
}

const job = (runId: string) => ({ runId, conversationKey: "//c1/", conversation: { conversation_id: "c1", thread_id: null } }) as unknown as RunJob;
const item = (runId: string, eventId: string) => ({ claimed_run_id: runId, runner_id: "http:a/b/c", claimed_at: new Date(0).toISOString(), event: { event_id: eventId } });
const tick = () => new Promise((r) => setTimeout(r, 5));

describe("steering drops retried by the alarm", () => {
  it("a drop that fails while the alarm retries another is still waiting after that retry, and recorded at the next one", async () => {
    const storage = new MemStorage();
    // Run A ended earlier and its drop could not be recorded: its claim waits, and A is remembered for retryDrops.
    await storage.put("steer:run_A:000000000000001:000000", item("run_A", "evt_a"));
    await storage.put("steer-drop:run_A", job("run_A"));
    // Run B is running with one claimed message.
    await storage.put("steer:run_B:000000000000002:000000", item("run_B", "evt_b"));
    const queue = new SteeringQueue(storage as unknown as DurableObjectStorage);
    const { db, batches } = scriptedDb();

    // The alarm retries A's drop: its write is on its way.
    const retried = queue.retryDrops(db);
    await tick();
    expect(batches).toHaveLength(1);
    // Meanwhile run B ends, and the database refuses B's drop: B is remembered for a retry.
    const dropB = queue.drop(db, job("run_B"));
    await tick();
    expect(batches).toHaveLength(2);
    batches[1].fail();
    expect(await dropB).toBe(false);
    expect(storage.m.has("steer-drop:run_B")).toBe(true);
    // A's write succeeds.
    batches[0].ok();
    // B is still waiting: the alarm must know, so it wakes again to retry it.
    expect(await retried).toBe(true);

    // The database is back: the next retry writes B's steering.dropped (not forgotten until the object restarts).
    const next = queue.retryDrops(db);
    await tick();
    batches[2]?.ok();
    await next;
    expect({ batches: batches.length, waitingB: storage.m.has("steer-drop:run_B") }).toEqual({ batches: 3, waitingB: false });
  });
});

/** A claimed event's job, as the claim stores it (its message whole: a drop can have it decided anew). */
const claimedJob = (runId: string, eventId: string) =>
  ({
    ...job(runId),
    event: { event_id: eventId, event_type: "message.received", source: "api", data: {} },
    input: { text: eventId, contents: [], attachments: [] },
    actor: { actor_type: "user", actor_id: "u1", metadata: {} },
    subject: null,
    runner: { runnerId: "http:a/b/default", capabilities: { steering: true } },
  }) as unknown as RunJob;
const answered = createDb({ query: async () => ({ rows: [] }), batch: async (qs) => qs.map(() => ({ rows: [] })) });

describe("a steering pull in rounds (a taken item found recalled) lost with its instance", () => {
  it("leaves what its earlier rounds took, recorded injected but never answered, to the run's drop: dropped and decided anew", async () => {
    const storage = new MemStorage();
    const target = claimedJob("run_T", "evt_0");
    const before = new SteeringQueue(storage as unknown as DurableObjectStorage);
    for (const n of [1, 2, 3]) await before.claim(answered, claimedJob(`run_${n}`, `evt_${n}`), target, Date.now());
    const { db, batches } = scriptedDb();
    void before.portFor(db, target).pull("all", 2);
    await tick();
    // Round one takes evt_1 and evt_2; evt_1 is found recalled, so a second round takes evt_3 in its place.
    batches[0].ok([["evt_1"]]);
    await tick();
    expect(batches).toHaveLength(2);
    // The instance dies with that round's write on the wire: the runner never has evt_2 (nor evt_3).
    const after = new SteeringQueue(storage as unknown as DurableObjectStorage);
    const drop = after.drop(db, target);
    await tick();
    batches[2].ok();
    expect(await drop).toBe(true);
    const named = (qs: SqlQuery[]) => ["evt_1", "evt_2", "evt_3"].filter((id) => JSON.stringify(qs).includes(`hev_steering_run_T_${id}`));
    // Each recorded dropped (evt_1 again as recalled, which its record keeps), and evt_2 and evt_3 decided anew.
    expect(named(batches[2].qs)).toEqual(["evt_1", "evt_2", "evt_3"]);
    const again = [...storage.m.keys()].filter((k) => k.startsWith("steer-again:")).map((k) => (storage.m.get(k) as { ref: { event_id: string } }).ref.event_id);
    expect(again).toEqual(expect.arrayContaining(["evt_2", "evt_3"]));
    expect([...storage.m.keys()].filter((k) => k.startsWith("steer-taking:"))).toEqual([]);
  });
});

describe("whether a run's event waits to be decided anew (the never-handed-over sweep asks, run by run)", () => {
  it("is answered from the dropped claims' records, reading no message, and from the message only for one kept by an earlier release", async () => {
    const storage = new MemStorage();
    const target = claimedJob("run_T", "evt_0");
    const queue = new SteeringQueue(storage as unknown as DurableObjectStorage);
    for (const n of [1, 2, 3]) await queue.claim(answered, claimedJob(`run_${n}`, `evt_${n}`), target, Date.now());
    expect(await queue.drop(answered, target)).toBe(true);
    // Kept by an earlier release, last in claim order: its record names no run, its message (the job) does.
    const old = { key: "steer-again:999999999999999:000000:run_U", body: "steer-item:run_U:999999999999999:000000" };
    await storage.put({ [old.key]: { ref: item("run_U", "evt_9"), body: old.body }, [old.body]: claimedJob("run_9", "evt_9") });
    const reads = vi.spyOn(storage, "get");
    const messagesRead = () => reads.mock.calls.flatMap(([key]) => (Array.isArray(key) ? key : [key])).filter((k) => k.startsWith("steer-item:"));
    expect(await Promise.all(["run_1", "run_3"].map((runId) => queue.awaitsDecision(runId)))).toEqual([true, true]);
    expect(messagesRead()).toEqual([]);
    expect(await queue.awaitsDecision("run_7")).toBe(false);
    expect(await queue.awaitsDecision("run_9")).toBe(true);
    expect(messagesRead()).toEqual([old.body, old.body]);
  });
});
