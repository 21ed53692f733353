/**
 * How many results of each unknown type get a `result.unknown_type` warning of their own in a run's ledger: a runner
 * sending a type this host does not know in a loop (a newer protocol's, say) would otherwise write two ledger rows a
 * line. The rest are counted, and the count is said once before the run's end (`suppressed`).
 */
export const MAX_UNKNOWN_TYPE_WARNINGS = 5;
/** Unknown types a run keeps apart; results of any type past them are counted without a warning. */
const MAX_UNKNOWN_TYPES = 100;
/** Types are told apart by their first characters, and warned of by them: a key per type stays small whatever a runner names it. */
export const TYPE_KEY_CHARS = 200;

export class UnknownTypeWarnings {
  private readonly perType = new Map<string, number>();
  private unwarned = 0;

  /** Whether this result of unknown `type` gets a warning of its own; counted when it does not. */
  admit(type: string): boolean {
    const key = type.slice(0, TYPE_KEY_CHARS);
    const seen = this.perType.get(key);
    const kept = seen !== undefined || this.perType.size < MAX_UNKNOWN_TYPES;
    if (kept) this.perType.set(key, (seen ?? 0) + 1);
    if (kept && (seen ?? 0) < MAX_UNKNOWN_TYPE_WARNINGS) return true;
    this.unwarned++;
    return false;
  }

  /** The results warned of by none since this was last taken (0 for none): said once, before the run's end. */
  takeUnwarned(): number {
    const count = this.unwarned;
    this.unwarned = 0;
    return count;
  }
}
