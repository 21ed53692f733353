import { afterEach, describe, expect, it, vi } from "vitest";
import { SteeringQueue } from "../../durable-objects/steering-queue";
import { MemStorage } from "../support/mem-storage";
import { createDb } from "../../src/db/client";
import type { SqlExecutor } from "../../src/db/executor";
import type { RunJob } from "../../src/run/job";

/**
 * README: a run pulls its claimed messages "in claim order". The queue keys a claim by the clock; the run table's
 * arrival keys already allow for a clock that steps back, or an object that comes back on a host whose clock is
 * behind the one it was on (ArrivalKeys). The steering queue must too, or a newer message is pulled first.
 */
const executor: SqlExecutor = { query: async () => ({ rows: [] }), batch: async (qs) => qs.map(() => ({ rows: [] })) };
const db = createDb(executor);
const job = (runId: string, eventId: string) =>
  ({
    runId,
    conversationKey: "//c1/",
    event: { event_id: eventId, event_type: "message.received", source: "api", data: {} },
    input: { text: eventId, contents: [], attachments: [] },
    conversation: { conversation_id: "c1", thread_id: null },
    actor: { actor_type: "user", actor_id: "u1", metadata: {} },
    subject: null,
    runner: { runnerId: "http:a/b/default", capabilities: { steering: true } },
  }) as unknown as RunJob;

afterEach(() => vi.useRealTimers());

describe("steering claim order", () => {
  it("is kept when the clock steps back between claims (and across instances of the object)", async () => {
    const storage = new MemStorage();
    const target = job("run_T", "evt_0");
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(1_700_000_010_000);
    const before = new SteeringQueue(storage as unknown as DurableObjectStorage);
    await before.claim(db, job("run_1", "evt_1"), target, Date.now());
    await before.claim(db, job("run_2", "evt_2"), target, Date.now());
    // The object comes back (an eviction, a deploy) on a machine whose clock is 50 ms behind.
    vi.setSystemTime(1_700_000_009_950);
    const after = new SteeringQueue(storage as unknown as DurableObjectStorage);
    await after.claim(db, job("run_3", "evt_3"), target, Date.now());
    // And within one instance, the clock steps back again.
    vi.setSystemTime(1_700_000_009_900);
    await after.claim(db, job("run_4", "evt_4"), target, Date.now());
    const pulled = await after.portFor(db, target).pull("all", undefined);
    expect(pulled.map((i) => i.event.event_id)).toEqual(["evt_1", "evt_2", "evt_3", "evt_4"]);
  });
});
