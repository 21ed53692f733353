import { describe, expect, it } from "vitest";
import { SteeringQueue } from "../../durable-objects/steering-queue";
import { MemStorage } from "../support/mem-storage";
import { createDb } from "../../src/db/client";
import type { SqlExecutor, SqlQuery } from "../../src/db/executor";
import type { RunJob } from "../../src/run/job";

/** A database whose write batches are answered by the test, one by one. */
function scriptedDb() {
  const batches: { qs: SqlQuery[]; ok: () => void; fail: () => void }[] = [];
  const executor: SqlExecutor = {
    query: async () => ({ rows: [] }),
    batch: (qs) =>
      new Promise((resolve, reject) => {
        batches.push({ qs, ok: () => resolve(qs.map(() => ({ rows: [] }))), fail: () => reject(new Error("database unavailable")) });
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
