import { writeAll, type Db } from "../db/client";
import type { ApiResult } from "../platforms/types";
import type { RunJob } from "../run/job";
import { hostRecordInsert, placeOfRun } from "../stores/event-log";
import { loggedError } from "../lib/describe-error";
import { exactWaitMs } from "../lib/retry-after";
import { newId } from "../lib/ids";
import { deliveryFailureNote } from "../stores/bot-notes";
import { deliveredMessageRef } from "./delivered-ref";
import { logDeliveryFailed } from "./failed-log";
import { Naps } from "./naps";

/**
 * Refused before any call for a limit ctx.delivery told the runner of (`platform_capabilities.files.max_bytes`, 0 where
 * the target takes no file): the runner's to heed, no failure of the bot. Recorded for the runner; never noted on the bot.
 */
const LIMITS_TOLD: ReadonlySet<unknown> = new Set(["file_too_large"]);

/** One row of the delivery trail; never holds a token, a URL or message text. */
export interface DeliveryFact {
  type: "delivery.attempted" | "delivery.succeeded" | "delivery.failed";
  data: Record<string, unknown>;
}

/**
 * One platform call's attempt as the trail records it: `delivery.attempted`, then its outcome (`retryInMs`: the wait
 * before the next attempt, null when none follows). The platform's error text is scrubbed of the bot's credentials.
 */
export function attemptFacts<T>(facts: Record<string, unknown>, o: { attempt: number; result: ApiResult<T>; retryInMs: number | null }, scrub: (text: string) => string): DeliveryFact[] {
  const { attempt, result, retryInMs } = o;
  const outcome: DeliveryFact = result.ok
    ? { type: "delivery.succeeded", data: { ...facts, attempt, ...(typeof result.value === "string" ? { message_id: result.value } : {}) } }
    : {
        type: "delivery.failed",
        data: {
          ...facts,
          attempt,
          status: result.failure.status,
          // A platform's code may be its own words (Slack's `error`, as a proxy may answer it): scrubbed as its message is.
          code: scrub(result.failure.code),
          error: scrub(result.failure.message),
          // Null too, as the Host API leaves one out, for a wait no reader's integer holds exactly: past 2^53 − 1 ms (JSON's
          // null for Infinity, 1e+23), which retryDelay gives up on as longer than DELIVERY_MAX_RETRY_AFTER_MS.
          retry_after_ms: exactWaitMs(result.failure.retryAfterMs) ?? null,
          will_retry: retryInMs !== null,
          retry_in_ms: retryInMs,
          ...(result.failure.continuesAs ? { continues_as: result.failure.continuesAs } : {}),
        },
      };
  return [{ type: "delivery.attempted", data: { ...facts, attempt } }, outcome];
}

/**
 * Appends delivery facts to EventLog off the delivery's own path: a slow or
 * failing database never delays or fails a reply (a write that fails is tried
 * again a few times), and `flushed()` lets the session wait for the trail
 * before the run's object moves on.
 */
export class DeliveryTrail {
  private writing: Promise<void> = Promise.resolve();
  /** When writes stop being made (flushed's bound), and how many were given up so. */
  private giveUpAt = Number.POSITIVE_INFINITY;
  private givenUp = 0;
  /** The session no longer waits (flushed() is over): a batch appended since is tried once, waited for by nothing. */
  private unwaited = false;
  /** Retry pauses, ended at the flush bound: one begun before it would otherwise hold the session up to a pause past it. */
  private readonly pauses = new Naps();

  constructor(
    private readonly db: Db,
    private readonly job: RunJob,
    private readonly platform: string,
    /** Between attempts at a batch of delivery facts (DB_WRITE_RETRY_PAUSES_MS): one attempt more than pauses. */
    private readonly retryPausesMs: readonly number[],
    /** The chat a message of the reply was posted in, when it may not be the target's (Messenger.chatOf). */
    private readonly chatOf: (messageId: string) => string | undefined = () => undefined,
  ) {}

  append(facts: DeliveryFact[]): void {
    const { job } = this;
    const place = placeOfRun(job);
    const records = facts.map((f): DeliveryFact => ({ type: f.type, data: { run_id: job.runId, event_id: job.event.event_id, platform: this.platform, bot_id: job.delivery?.botId ?? null, ...f.data } }));
    const statements: unknown[] = records.map((r) =>
      // Its own id, so a write tried again after it went unanswered records nothing twice.
      hostRecordInsert(this.db, { onceAs: newId("hev"), eventType: r.type, ...place, runId: job.runId, data: r.data, messageRef: r.type === "delivery.succeeded" ? deliveredMessageRef(job, r.data, this.chatOf) : null }),
    );
    // A failure given up on is noted on the bot too, in the same write: its admin view shows why a reply never came
    // (a token revoked, a user who blocked the bot) without knowing the conversation. Nothing is written for a success.
    // One the reply goes on from another way (`continues_as`) is no reply lost, nor is a file past a limit the runner was told.
    const givenUp = records.findLast((r) => r.type === "delivery.failed" && r.data.will_retry === false && r.data.continues_as === undefined && !LIMITS_TOLD.has(r.data.code));
    if (givenUp && job.delivery) {
      const { platform: _platform, bot_id: _botId, will_retry: _willRetry, retry_in_ms: _retryInMs, item: _item, ...facts } = givenUp.data;
      statements.push(deliveryFailureNote(this.db, { botId: job.delivery.botId, platform: this.platform, registeredAt: job.delivery.registeredAt }, { ...facts, conversation_id: place.conversationId, thread_id: place.threadId }));
      logDeliveryFailed(job.runId, { ...givenUp.data, conversation_id: place.conversationId });
    }
    this.writing = this.writing.then(() => this.write(statements));
  }

  /** Tried again a few times over a few seconds: a database blip must not lose the record that a reply was delivered. */
  private async write(statements: unknown[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      // Past the flush bound, what the session waits for is given up: counted and said once by flushed(), never waited for.
      if (!this.unwaited && Date.now() >= this.giveUpAt) return void this.givenUp++;
      try {
        return await writeAll(this.db, statements);
      } catch (err) {
        // A batch nothing waits for (a call in flight when the reply was abandoned, answered since) gets one try.
        const lastTry = attempt >= this.retryPausesMs.length || this.unwaited || Date.now() >= this.giveUpAt;
        if (lastTry) return console.error(`run ${this.job.runId}: delivery record not written: ${loggedError(err)}`);
        await this.pauses.sleep(this.retryPausesMs[attempt]);
      }
    }
  }

  /**
   * The trail's writes, waited for until `by` (epoch ms): one batch after another, each with its retries, a database
   * that hangs would otherwise hold the session (and the alarm that settles it) for minutes per batch. Past `by`, no
   * write begins, is tried again or waits out a pause; one begun ends within its query timeout. Batches appended
   * meanwhile (a call that was in flight when the reply was abandoned) are waited for too; any appended after are
   * written without being waited for.
   */
  async flushed(by: number): Promise<void> {
    this.giveUpAt = by;
    const bound = setTimeout(() => this.pauses.wakeAll(), Math.max(0, by - Date.now()));
    try {
      for (let seen: Promise<void> | undefined; seen !== this.writing; ) await (seen = this.writing);
    } finally {
      clearTimeout(bound);
    }
    this.unwaited = true;
    if (this.givenUp) console.error(`run ${this.job.runId}: ${this.givenUp} delivery record write(s) given up: the database had not taken them by the reply's settle bound`);
  }
}
