import { logRunEnd, type LoggedRun, type UnloggedEnd } from "./end-log";

/** How a run's record says it ended. */
export interface RecordedEnd {
  status: string;
  errorCode: string | null;
}

interface KeptEnd extends UnloggedEnd {
  run: LoggedRun;
}

const sameEnd = (a: { status: string; errorCode?: string | null }, b: { status: string; errorCode?: string | null }) => a.status === b.status && (a.errorCode ?? null) === (b.errorCode ?? null);

/**
 * Ends of runs whose write got no answer (it may or may not have been applied), kept by the conversation's instance
 * that wrote them: none has its `run.ended` line yet, as only the write that ended a run logs it. Whoever later finds
 * such a run ended (its start, a cancel or a host's end tried again, its end as lost) says how its record reads, and
 * the kept end that recorded it is logged then, once; the others are done with. An instance lost with them leaves
 * their lines unlogged (README).
 */
export class UnansweredEnds {
  private readonly ends = new Map<string, KeptEnd[]>();

  /** An end whose write got no answer; one saying the same already kept (a retry of it) is kept once. */
  note(run: LoggedRun, end: UnloggedEnd): void {
    const kept = this.ends.get(run.runId) ?? [];
    if (kept.some((k) => sameEnd(k.outcome, end.outcome))) return;
    this.ends.set(run.runId, [...kept, { run, ...end }]);
  }

  has(runId: string): boolean {
    return this.ends.has(runId);
  }

  /**
   * The run is found ended: the kept end its record says (`recorded`) is logged. Without the record, only a single
   * kept end is: the finder knows nothing else can have ended the run (the run's own end, found by the host's end of
   * the same instance). Every kept end of the run is then done with.
   */
  found(runId: string, recorded?: RecordedEnd): void {
    const kept = this.ends.get(runId);
    if (!kept) return;
    this.ends.delete(runId);
    const end = recorded ? kept.find((k) => sameEnd(k.outcome, recorded)) : kept.length === 1 ? kept[0] : undefined;
    if (end) logRunEnd(end.run, end.outcome, end.facts);
  }

  /** The run's kept ends were not applied (it started since), or its end is logged by a write answered since. */
  forget(runId: string): void {
    this.ends.delete(runId);
  }
}
