import type { HostRecord, RecordPlace } from "../stores/event-log";

/**
 * How many of a run's dropped results get a `runner.result_dropped` record each in its conversation's EventLog,
 * which every runner of the conversation pages (`event.page`): a runner sending invalid results in a loop would
 * otherwise write one per line up to its stream limit. Its ledger still warns of each (the run's own).
 */
export const MAX_AUDITED_DROPS = 100;

/** A run's dropped results, counted (so per run): past the cap, one record at its end says how many were not audited. */
export class DropAuditCount {
  private seen = 0;

  /** Whether this drop is audited. */
  admit(): boolean {
    return ++this.seen <= MAX_AUDITED_DROPS;
  }

  /** The record of the drops not audited, for the run's end; none when every one was. */
  summary(run: { runId: string; runnerId: string; place: RecordPlace }): HostRecord[] {
    const suppressed = Math.max(0, this.seen - MAX_AUDITED_DROPS);
    if (!suppressed) return [];
    const reason = `${suppressed} more dropped results of this run were not recorded: only the first ${MAX_AUDITED_DROPS} of a run are (its ledger warns of each)`;
    return [
      {
        eventType: "runner.result_dropped",
        ...run.place,
        runId: run.runId,
        // Its own id: a run's end written twice still leaves one.
        onceAs: `hev_drops_${run.runId}`,
        data: { run_id: run.runId, runner_id: run.runnerId, result_type: null, sequence: null, ledger_seq: null, reason, suppressed },
      },
    ];
  }
}
