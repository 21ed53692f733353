import { BlobStoreUnavailable } from "./blob-fault";

/**
 * An R2 call that got no answer within its bound (BLOB_OP_TIMEOUT_MS, or the time left before a platform's
 * acknowledgement deadline), or a body R2 sent or took nothing of for that long. No answer is no refusal: a put or a
 * delete given up on may still be applied (a blob no row names is then the orphan walk's: retention/orphans.ts).
 */
export class BlobStoreTimeout extends BlobStoreUnavailable {
  override readonly name = "BlobStoreTimeout";
  constructor(
    op: string,
    target: string,
    readonly timeoutMs: number,
  ) {
    super(op, target, `R2 did not answer a ${op} of ${target} within ${timeoutMs} ms`);
  }

  get said(): string {
    return `did not answer in time (an R2 ${this.op} within ${this.timeoutMs} ms)`;
  }
}

/** `work`'s outcome, or a BlobStoreTimeout once `ms` pass without it (what `work` does later is ignored). */
export function answeredWithin<T>(work: Promise<T>, ms: number, timeout: () => BlobStoreTimeout): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(timeout()), ms)));
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
