import { isStorageSide } from "../artifacts/blob-fault";
import { BlobStoreTimeout } from "../artifacts/blob-timeout";
import { RUN_ENDED } from "../runner/errors";

/**
 * Pauses before each new attempt at a put R2 refused: a refusal is mostly a moment's (R2's "internal error, please try
 * again"), and a lost artifact cannot be had back once the runner has moved on.
 */
export const BLOB_PUT_RETRY_MS = [100, 400, 1_000];

/** A run's pauses for refused puts add up to at most this: in a lasting outage each artifact costs its tries, not the run its time. */
export const BLOB_PUT_RETRY_BUDGET_MS = 3_000;

/** When a run stops trying: its signal aborted by a cancel or the deadline (RUN_ENDED only says its runner is done), and its deadline. */
export interface PutLimits {
  signal: AbortSignal;
  deadlineAt: number;
}

/** Resolves after `ms`, or as soon as `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

/** A run's puts of its inline artifacts' blobs, each tried again after a refusal while its run may still wait for it. */
export class BlobPuts {
  private pausedMs = 0;

  constructor(
    private readonly bucket: R2Bucket,
    private readonly limits: PutLimits,
    private readonly pausesMs: readonly number[] = BLOB_PUT_RETRY_MS,
    private readonly budgetMs = BLOB_PUT_RETRY_BUDGET_MS,
  ) {}

  /** Stored: null; else R2's last refusal and how many attempts were made. */
  async put(key: string, bytes: Uint8Array, options?: R2PutOptions): Promise<{ err: unknown; attempts: number } | null> {
    for (let attempt = 1; ; attempt++) {
      const err = await this.bucket.put(key, bytes, options).then(
        () => null,
        (e: unknown) => ({ e }),
      );
      if (!err) return null;
      // Only R2's own failure may be a moment's. No answer is none: R2 had its whole bound (BLOB_OP_TIMEOUT_MS), and
      // another try would wait as long; nor is an error of the put itself (a key R2 cannot hold), which would recur.
      if (err.e instanceof BlobStoreTimeout || !isStorageSide(err.e)) return { err: err.e, attempts: attempt };
      const wait = this.pausesMs[attempt - 1];
      if (wait === undefined || !this.mayWait(wait)) return { err: err.e, attempts: attempt };
      this.pausedMs += wait;
      await pause(wait, this.limits.signal);
      if (this.stopped) return { err: err.e, attempts: attempt };
    }
  }

  private get stopped(): boolean {
    return this.limits.signal.aborted && this.limits.signal.reason !== RUN_ENDED;
  }

  private mayWait(ms: number): boolean {
    return !this.stopped && this.pausedMs + ms <= this.budgetMs && Date.now() + ms < this.limits.deadlineAt;
  }
}
