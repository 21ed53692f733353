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

/**
 * A run's dropped results, counted (so per run): past the cap, no more are audited. The run's end counts those without
 * an audit of their own (drop-records.ts): the drops seen here less the audits EventLog holds when the end is
 * written, so a write that held audits and was refused, or got no answer and was never applied, leaves them counted.
 */
export class DropAuditCount {
  private count = 0;

  /** Whether this drop is audited. */
  admit(): boolean {
    return ++this.count <= MAX_AUDITED_DROPS;
  }

  /** The run's drops so far, audited or not, those of writes never applied included. */
  get seen(): number {
    return this.count;
  }
}
