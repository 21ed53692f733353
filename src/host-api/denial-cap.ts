import { writeAll, type Db } from "../db/client";
import { retryingRefused } from "../db/refused-retry";
import { loggedError } from "../lib/describe-error";
import type { AuthorizationSnapshot } from "../run/snapshot";
import { hostRecordInsert } from "../stores/event-log";

/**
 * How many of a run's denials are recorded in full (EventLog, ledger, live followers). A runner refused in a loop,
 * with all its calls in flight until its deadline, would otherwise write rows as fast as it is answered.
 */
export const MAX_RECORDED_DENIALS = 100;

/**
 * A run's denials, counted in its session (so per run). Past the cap a denial is still answered and logged, only not
 * recorded; when the run is over, one `host_api.denied` record says how many were not.
 */
export class DenialCount {
  private seen = 0;

  /** Whether this denial is recorded. Taken synchronously: calls denied at once never pass the cap together. */
  admit(): boolean {
    return ++this.seen <= MAX_RECORDED_DENIALS;
  }

  get suppressed(): number {
    return Math.max(0, this.seen - MAX_RECORDED_DENIALS);
  }

  /** The run is over: the count of denials not recorded, as one EventLog record (none when all were). Never throws. */
  async tell(db: Db, s: AuthorizationSnapshot, retryPausesMs: readonly number[]): Promise<void> {
    const suppressed = this.suppressed;
    if (!suppressed) return;
    const reason = `${suppressed} more denials of this run were not recorded: only the first ${MAX_RECORDED_DENIALS} of a run are`;
    const data = { run_id: s.runId, runner_id: s.runnerId, action: null, resource: {}, scope: { conversation_id: s.conversationId, thread_id: s.threadId }, reason, suppressed };
    const place = { conversationKey: s.conversationKey, conversationId: s.conversationId, threadId: s.threadId, workspaceId: s.workspaceId, botId: s.botId };
    // Its own id: told twice (a session closes once), it is still one record.
    const record = hostRecordInsert(db, { onceAs: `hev_denials_${s.runId}`, eventType: "host_api.denied", ...place, runId: s.runId, data });
    // Refused for a moment, tried again as a run's own writes are; unrecorded, the operator still reads the count on the log.
    await retryingRefused(() => writeAll(db, [record]), retryPausesMs).catch((e: unknown) => console.error(`run ${s.runId}: ${reason}; that count not recorded either: ${loggedError(e)}`));
  }
}
