/**
 * Storage's trouble, not the request's: an R2 call that got no answer in time (BlobStoreTimeout) or that R2 failed
 * itself (BlobStoreFailed: its internal error, an overload, the network to it). Routes answer it 503
 * `storage_unavailable` (the Host API a retryable 500), and sent again later it may well be served. An error of a
 * request the host made wrong (a key R2 cannot hold, a checksum that does not match) is none: it stays the host's own
 * fault, as it would fail the same way again.
 */
export abstract class BlobStoreUnavailable extends Error {
  constructor(
    /** `head`, `get`, `put`, `delete`, `list`, or a part of one (`read` of a body, `multipart complete`...). */
    readonly op: string,
    /** The key, or how many keys (a delete of several), or the listing's prefix. */
    readonly target: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** What an answer may say of it, after "storage": the kind of call, never its key nor R2's words. */
  abstract get said(): string;
}

/** An R2 call R2 failed at once: its error (R2's own words, or the network's) is the cause. */
export class BlobStoreFailed extends BlobStoreUnavailable {
  override readonly name = "BlobStoreFailed";
  constructor(op: string, target: string, cause: unknown) {
    super(op, target, `R2 failed a ${op} of ${target}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }

  get said(): string {
    return `failed (an R2 ${this.op} did not go through)`;
  }
}

/**
 * R2's codes (the `(10001)` its binding ends a message with, or an error's `code`) that say R2 itself is unwell or
 * busy: InternalError, ServiceUnavailable, TooManyRequests (too many writes of one key at once). Every other code
 * answers something of the request (InvalidObjectName, BadDigest, PreconditionFailed, NoSuchUpload, InvalidPart...).
 */
const STORAGE_SIDE_CODES = new Set([10001, 10043, 10058]);

/** The R2 code an error carries, if any. */
function r2CodeOf(err: Error): number | null {
  const code = (err as { code?: unknown }).code;
  if (typeof code === "number") return code;
  const tail = /\((\d{5,6})\)$/.exec(err.message);
  return tail ? Number(tail[1]) : null;
}

/** Whether an error an R2 call threw is storage's trouble (see BlobStoreUnavailable), not the request's. */
export function isStorageSide(err: unknown): boolean {
  if (err instanceof BlobStoreUnavailable || !(err instanceof Error)) return true;
  const code = r2CodeOf(err);
  if (code !== null) return STORAGE_SIDE_CODES.has(code);
  // The binding's own checks of what it was given (a value of the wrong type, a stream's length) throw the first two;
  // a body R2 did send, read as JSON (`json()`), that is not JSON throws the third: the content's fault, not R2's.
  if (err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError) return false;
  // No code: R2 was not reached, or gave no answer it could read (a connection lost, the runtime's "internal error").
  return true;
}

/** An error thrown by the R2 call `op` of `target` as callers see it: storage's trouble wrapped (its cause kept), anything else as thrown. */
export function asStorageFault(op: string, target: string, err: unknown): unknown {
  if (err instanceof BlobStoreUnavailable || !isStorageSide(err)) return err;
  return new BlobStoreFailed(op, target, err);
}
