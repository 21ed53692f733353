import { SealedSecretError } from "../lib/secret-box";
import { UPSTREAM_ERROR_STATUS } from "../protocol/errors";
import { redact } from "../resources/secrets";
import { UpstreamError } from "../resources/upstream";
import type { ActionContext } from "./actions/context";
import { ApiError } from "./errors";

/**
 * A failed call to a host-held resource as the runner sees it: the host's own
 * refusals pass through; an upstream failure is a 502 `runtime_error` whose
 * message has the resource's secrets scrubbed out.
 */
export function toApiError(err: unknown, secrets: readonly string[], details: Record<string, unknown>): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof SealedSecretError) return unopenedCredential(err, details);
  if (err instanceof UpstreamError) {
    return new ApiError("runtime_error", redact(err.message, secrets), {
      status: UPSTREAM_ERROR_STATUS,
      retryable: err.providerFault,
      details: { ...details, ...(err.status ? { upstream_status: err.status } : {}) },
      cause: err,
    });
  }
  const message = err instanceof Error ? err.message : String(err);
  return new ApiError("runtime_error", redact(message, secrets), { status: UPSTREAM_ERROR_STATUS, details, cause: err });
}

/** A resource whose stored credential the host's keys cannot open: the host's fault (500), told without the credential. */
export function unopenedCredential(err: SealedSecretError, details?: Record<string, unknown>): ApiError {
  return new ApiError("runtime_error", `the host cannot open this resource's stored credential (${err.message}); an operator must check SECRETS_KEY`, { status: 500, details, cause: err });
}

/** One log line per failed upstream call, for operators; the message is already scrubbed. */
export function logUpstreamFailure(ctx: ActionContext, what: string, failure: ApiError): void {
  console.warn(`run ${ctx.snapshot.runId}: ${what} failed (${failure.code}): ${failure.message}`);
}
