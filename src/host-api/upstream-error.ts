import { loggedText } from "../lib/log-text";
import { exactWaitMs } from "../lib/retry-after";
import { SealedSecretError } from "../lib/secret-box";
import { UPSTREAM_ERROR_STATUS } from "../protocol/errors";
import { headOf } from "../lib/text";
import { redact } from "../resources/secrets";
import { UpstreamError } from "../resources/upstream";
import type { ActionContext } from "./actions/context";
import { ApiError, hostFault } from "./errors";

/** How much of an upstream's message is shown: cut only once scrubbed, so no secret is cut in half and let through. */
const SHOWN_MESSAGE_CHARS = 600;

/**
 * A failure's message as a runner, the ledger and the log may see it: scrubbed of the resource's secrets, then cut.
 * An upstream's words its message ends with were cut before the secrets were known (UpstreamError.cutShort): there
 * the last few characters that could start a secret are left out, and `…` says the words went on.
 */
export function shownUpstreamMessage(failure: unknown, secrets: readonly string[]): string {
  const message = failure instanceof Error ? failure.message : String(failure);
  const cutShort = failure instanceof UpstreamError && failure.cutShort;
  const scrubbed = redact(message, secrets, { tail: cutShort });
  return scrubbed.length > SHOWN_MESSAGE_CHARS || cutShort ? `${headOf(scrubbed, SHOWN_MESSAGE_CHARS)}…` : scrubbed;
}

/**
 * A failed call to a host-held resource as the runner sees it: the host's own
 * refusals pass through; an upstream failure is a 502 `runtime_error` whose
 * message has the resource's secrets scrubbed out. Anything else failed in
 * the host itself (its database, its bucket): §8's retryable 500, the cause
 * (which may quote SQL) logged only.
 */
export function toApiError(err: unknown, secrets: readonly string[], details: Record<string, unknown>, call: { runId: string; action: string }): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof SealedSecretError) return unopenedCredential(err, details);
  if (err instanceof UpstreamError) {
    return new ApiError("runtime_error", shownUpstreamMessage(err, secrets), {
      status: UPSTREAM_ERROR_STATUS,
      retryable: err.providerFault,
      details: {
        ...details,
        ...(err.status ? { upstream_status: err.status } : {}),
        // Passed on only with a failure worth retrying: when the upstream said to try again. A wait past any whole
        // number a runner's integer holds (`Retry-After: 999…9`, as `null`; `1e20` seconds, as `1e+23`) is no wait to pass on.
        ...(err.providerFault && exactWaitMs(err.retryAfterMs) !== undefined ? { retry_after_ms: err.retryAfterMs } : {}),
      },
      cause: err,
    });
  }
  return hostFault(call.runId, call.action, err);
}

/** A resource whose stored credential the host's keys cannot open: the host's fault (500), told without the credential. */
export function unopenedCredential(err: SealedSecretError, details?: Record<string, unknown>): ApiError {
  return new ApiError("runtime_error", `the host cannot open this resource's stored credential (${err.message}); an operator must check SECRETS_KEY`, { status: 500, details, cause: err });
}

/**
 * One log line per failed upstream call, for operators: the message already scrubbed, and escaped, so an upstream's
 * words are one line of the log. The host's own fault is not logged again: hostFault logged it, with its cause.
 */
export function logUpstreamFailure(ctx: ActionContext, what: string, failure: ApiError): void {
  if (failure.logged) return;
  console.warn(`run ${ctx.snapshot.runId}: ${what} failed (${failure.code}): ${loggedText(failure.message)}`);
}
