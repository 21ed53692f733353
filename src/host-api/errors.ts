import { BlobStoreUnavailable } from "../artifacts/blob-fault";
import { loggedError } from "../lib/describe-error";
import { API_ERROR_STATUS, makeApiError, type AgentAPIError, type ApiErrorCode } from "../protocol/errors";

/** A refused Host API call; `status` defaults to the §8 status of its code. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  readonly details?: Record<string, unknown>;
  readonly retryable?: boolean;
  /** Already in the log with its cause (hostFault): not logged again as the call's failure. */
  readonly logged: boolean;
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    options: { status?: number; details?: Record<string, unknown>; retryable?: boolean; cause?: unknown; logged?: boolean } = {},
  ) {
    super(message, { cause: options.cause });
    this.status = options.status ?? API_ERROR_STATUS[code];
    this.details = options.details;
    this.retryable = options.retryable;
    this.logged = options.logged ?? false;
  }

  toBody(): { ok: false; error: AgentAPIError } {
    return { ok: false, error: makeApiError(this.code, this.message, { details: this.details, retryable: this.retryable }) };
  }
}

/** 401: the bearer token is missing, wrong, of another run, or of a run that ended. */
export const invalidToken = () => new ApiError("unauthorized", "run token is not valid for an active run", { status: 401 });
export const denied = (message: string, details?: Record<string, unknown>) => new ApiError("unauthorized", message, { details });

/**
 * The host's own failure while serving a call (the database refused or timed out, R2 failed or did not answer): answered in
 * §8's shape as a retryable 500 `runtime_error`. The cause goes to the log only: it may name tables, queries or keys.
 */
export function hostFault(runId: string, action: string | null, cause: unknown): ApiError {
  console.error(`run ${runId}: ${action ?? "Host API call"} failed in the host: ${loggedError(cause)}`);
  const what = cause instanceof BlobStoreUnavailable ? `the host's storage ${cause.said}` : "the host failed while serving this call";
  return new ApiError("runtime_error", `${what}; it may be tried again`, { status: 500, retryable: true, cause, logged: true });
}
