import { writeAll, type Db } from "../db/client";
import type { RunJob } from "../run/job";
import { hostRecordInsert } from "../stores/event-log";
import { describeError } from "../lib/describe-error";

/** One row of the delivery trail; never holds a token, a URL or message text. */
export interface DeliveryFact {
  type: "delivery.attempted" | "delivery.succeeded" | "delivery.failed";
  data: Record<string, unknown>;
}

/**
 * Appends delivery facts to EventLog off the delivery's own path: a slow or
 * failing database never delays or fails a reply, and `flushed()` lets the
 * session wait for the trail before the run's object moves on.
 */
export class DeliveryTrail {
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Db,
    private readonly job: RunJob,
    private readonly platform: string,
  ) {}

  append(facts: DeliveryFact[]): void {
    const { job } = this;
    const statements = facts.map((f) =>
      hostRecordInsert(this.db, {
        eventType: f.type,
        conversationKey: job.conversationKey,
        conversationId: job.conversation.conversation_id,
        threadId: job.conversation.thread_id,
        runId: job.runId,
        data: { run_id: job.runId, event_id: job.event.event_id, platform: this.platform, bot_id: job.delivery?.botId ?? null, ...f.data },
      }),
    );
    this.writing = this.writing
      .then(() => writeAll(this.db, statements))
      .catch((err: Error) => console.error(`run ${job.runId}: delivery record not written: ${describeError(err)}`));
  }

  flushed(): Promise<void> {
    return this.writing;
  }
}
