import type { HostRecord, RecordPlace } from "../stores/event-log";

/**
 * How many of a run's dropped results get a `runner.result_dropped` record each in its conversation's EventLog,
 * which every runner of the conversation pages (`event.page`): a runner sending invalid results in a loop would
 * otherwise write one per line up to its stream limit. Its ledger still warns of each (the run's own).
 */
export const MAX_AUDITED_DROPS = 100;

/**
 * The code of the one ledger warning naming a result (`ledger_seq`) that is not a drop with an audit record: a result
 * of a type the host does not know is ignored, not dropped. Every other warning naming one reports a drop.
 */
export const UNKNOWN_TYPE_WARNING = "result.unknown_type";

/**
 * The code of the warning naming the result past a cap that failed its run (RUN_MAX_MESSAGES, RUN_MAX_STATE_UPDATES):
 * a drop with its audit, as any other. Its entry may be a valid `run.completed`, dropped whole (it ended nothing).
 */
export const OVER_LIMIT_WARNING = "result.over_limit";

/**
 * The code of the warning naming a `state.updated` dropped because its scope is full (STATE_MAX_SCOPE_KEYS or
 * STATE_MAX_SCOPE_BYTES): a drop with its audit; the run goes on.
 */
export const STATE_SCOPE_FULL_WARNING = "result.state_scope_full";

/** The facts a run's summary of its unaudited drops names. */
export interface DropSummaryTarget {
  runId: string;
  runnerId: string;
  place: RecordPlace;
}

/**
 * The record of a run's drops that got no audit of their own, `unwritten` of them because the database refused the
 * write that held their audits (their ledger entries too); none when there are none.
 */
export function unauditedDropsRecord(run: DropSummaryTarget, suppressed: number, unwritten = 0): HostRecord[] {
  if (suppressed <= 0) return [];
  const why = unwritten ? `: only the first ${MAX_AUDITED_DROPS} of a run get one, and the database refused the write of ${unwritten} of those` : `: only the first ${MAX_AUDITED_DROPS} of a run are (its ledger warns of each)`;
  const reason = `${suppressed} ${unwritten ? "" : "more "}dropped results of this run were not recorded${why}`;
  return [
    {
      eventType: "runner.result_dropped",
      ...run.place,
      runId: run.runId,
      // Its own id: a run's end written twice (or by the host after its own write of it failed) still leaves one.
      onceAs: `hev_drops_${run.runId}`,
      data: { run_id: run.runId, runner_id: run.runnerId, result_type: null, sequence: null, ledger_seq: null, reason, suppressed },
    },
  ];
}

/**
 * A run's dropped results, counted (so per run): past the cap, one record at its end says how many were not audited,
 * those whose audit the database refused to write included.
 */
export class DropAuditCount {
  private seen = 0;
  private unwritten = 0;

  /** Whether this drop is audited. */
  admit(): boolean {
    return ++this.seen <= MAX_AUDITED_DROPS;
  }

  /** A write holding `audits` of the admitted drops' records was refused (not applied) or never made (a read it needed refused): they were never recorded. */
  refused(audits: number): void {
    this.unwritten += audits;
  }

  /** The record of the drops not audited, for the run's end; none when every one was. */
  summary(run: DropSummaryTarget): HostRecord[] {
    return unauditedDropsRecord(run, Math.max(0, this.seen - MAX_AUDITED_DROPS) + this.unwritten, this.unwritten);
  }
}
