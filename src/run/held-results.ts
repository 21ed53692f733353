import type { ResultBatch } from "./result-batch";

/** Resolves after `ms`; `cancel` clears its timer (the read it raced came first). */
function pause(ms: number): { done: Promise<"due">; cancel: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const done = new Promise<"due">((resolve) => (timer = setTimeout(() => resolve("due"), ms)));
  return { done, cancel: () => clearTimeout(timer) };
}

/**
 * Results applied but not written yet, merged into one batch. A run's results are written at most once per
 * `intervalMs` (counted from the start of the previous write), or sooner once `maxBytes` of result lines are held:
 * in production every write is a subrequest of the conversation object's alarm, and a runner streaming a token per
 * line would otherwise cost one per line. A runner slower than that is written as before, each read at once.
 *
 * An answer held (a message for the Transcript) is written sooner, once the run's writes so far leave room for it
 * (one per `intervalMs` since the run began, and one more): a user's message arriving meanwhile would otherwise be
 * stored before the answer it followed, and a later run reading history would see them so. A run's writes stay at most
 * one per interval of its time, plus one.
 */
export class HeldResults {
  private batch: ResultBatch | null = null;
  private bytes = 0;
  private lastWriteAt = -Infinity;
  private writes = 0;
  private readonly startedAt = Date.now();

  constructor(
    private readonly intervalMs: number,
    private readonly maxBytes: number,
  ) {}

  /** Adds a chunk's batch (of `bytes` of lines) to what is held; answers the merged batch. */
  add(batch: ResultBatch, bytes: number): ResultBatch {
    this.bytes += bytes;
    const held = this.batch;
    if (!held) return (this.batch = batch);
    held.ledger.push(...batch.ledger);
    held.transcriptItems.push(...batch.transcriptItems);
    held.stateWrites.push(...batch.stateWrites);
    held.inlineArtifacts.push(...batch.inlineArtifacts);
    held.artifactReferences.push(...batch.artifactReferences);
    held.audits.push(...batch.audits);
    held.terminal = batch.terminal;
    held.error = batch.error;
    return held;
  }

  /** Whether what is held should be written now. */
  get due(): boolean {
    return this.batch !== null && Date.now() >= this.dueAt;
  }

  /** When what is held falls due. */
  private get dueAt(): number {
    if (this.bytes >= this.maxBytes) return -Infinity;
    const next = this.lastWriteAt + this.intervalMs;
    // Each write at least an interval after the one before, else (an answer) the n-th is never before startedAt +
    // (n - 2) intervals: the one more than one per interval, taken early, is given back as the run's time passes.
    return this.batch?.transcriptItems.length ? Math.min(next, this.startedAt + (this.writes - 1) * this.intervalMs) : next;
  }

  /** The held batch, to be written now (the interval counts from here); null when none is held. */
  take(): ResultBatch | null {
    const held = this.batch;
    this.batch = null;
    this.bytes = 0;
    if (held) {
      this.lastWriteAt = Date.now();
      this.writes++;
    }
    return held;
  }

  /** The next read, or "due" if what is held falls due first (the read is still pending then: await it again). */
  async readOrDue<T>(read: Promise<T>): Promise<T | "due"> {
    if (!this.batch) return read;
    const wait = pause(Math.max(0, this.dueAt - Date.now()));
    try {
      return await Promise.race([read, wait.done]);
    } finally {
      wait.cancel();
    }
  }
}
