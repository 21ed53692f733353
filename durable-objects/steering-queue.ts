import { writeAll, type Db } from "../src/db/client";
import type { SteeringInputItem } from "../src/protocol/host-api-results";
import type { RunJob } from "../src/run/job";
import { steeringOutcomeInsert } from "../src/run/steering";

/** PROTOCOL §10: a run holds at most this many claimed messages; more fall back to the strategy. */
export const STEERING_QUEUE_CAP = 100;

const prefixOf = (runId: string) => `steer:${runId}:`;

/**
 * A run's steering queue in the Durable Object's storage: claimed messages in
 * claim order, kept durably so that a run lost with its instance can still
 * record what it never pulled.
 */
export class SteeringQueue {
  private claims = 0;

  constructor(private readonly storage: DurableObjectStorage) {}

  async size(runId: string): Promise<number> {
    return (await this.storage.list({ prefix: prefixOf(runId) })).size;
  }

  /** Appends without awaiting: the output gate holds replies until the write is durable. */
  push(runId: string, item: SteeringInputItem): string {
    // Time first for claim order across instances; the counter breaks ties within one.
    const key = `${prefixOf(runId)}${String(Date.now()).padStart(15, "0")}:${String(this.claims++).padStart(6, "0")}`;
    this.storage.put(key, item);
    return key;
  }

  remove(keys: string[]): Promise<number> {
    return this.storage.delete(keys);
  }

  /** Put taken items back under their own keys (claim order is kept). */
  restore(items: [string, SteeringInputItem][]): Promise<void> {
    return this.storage.put(Object.fromEntries(items));
  }

  /** Oldest first, at most `limit`. */
  async peek(runId: string, limit?: number): Promise<[string, SteeringInputItem][]> {
    const items = await this.storage.list<SteeringInputItem>({ prefix: prefixOf(runId), limit });
    return [...items];
  }

  /**
   * Take items off a run's queue and record what became of them (pulled by
   * the run, or dropped at its end). They leave the queue before the libSQL
   * write (storage calls do not open the input gate, the write does), so a
   * concurrent pull or drop never sees them too; they are put back if the
   * write fails.
   */
  async take(db: Db, run: RunJob, outcome: "injected" | "dropped", limit?: number): Promise<[string, SteeringInputItem][]> {
    const items = await this.peek(run.runId, limit);
    if (!items.length) return items;
    await this.remove(items.map(([k]) => k));
    try {
      await writeAll(db, items.map(([, item]) => steeringOutcomeInsert(db, outcome, item, run)));
    } catch (err) {
      await this.restore(items);
      throw err;
    }
    return items;
  }
}
