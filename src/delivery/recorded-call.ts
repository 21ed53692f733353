/**
 * One platform call of a reply with its retries (./retry.ts), each attempt and its outcome recorded in the reply's trail
 * (./records.ts). Once the reply is abandoned, a call answers ABANDONED without reaching the platform, and nothing is
 * recorded of it: no call was made.
 */
import type { ApiResult } from "../platforms/types";
import { attemptFacts, type DeliveryTrail } from "./records";
import { withRetries, type RetryPolicy } from "./retry";

/** What a call made after the reply was abandoned (its settle timeout, its bot or place gone) answers. */
export const ABANDONED: ApiResult<never> = { ok: false, failure: { kind: "permanent", status: null, code: "abandoned", message: "delivery abandoned" } };

/** What a reply's calls share: its retry policy and trail, whether it was abandoned, how it waits and scrubs. */
export interface CallScope {
  retry: RetryPolicy;
  trail: DeliveryTrail;
  abandoned(): boolean;
  /** The platform's words without the bot's credentials. */
  scrub(text: string): string;
  sleep(ms: number): Promise<void>;
}

/** `minRetryGapMs`: the least wait before another attempt (an edit's interval). */
export function recordedCall<T>(scope: CallScope, facts: Record<string, unknown>, attempt: () => Promise<ApiResult<T>>, minRetryGapMs: number, retryMaybeApplied = true): Promise<ApiResult<T>> {
  // Once the platform refused the text's formatting, the messenger sends it plain: the trail says so.
  let asPlain = false;
  return withRetries(
    { ...scope.retry, retryMaybeApplied },
    async () => (scope.abandoned() ? ABANDONED : attempt()),
    ({ attempt: n, result, retryInMs }) => {
      if (result === ABANDONED) return;
      scope.trail.append(attemptFacts(asPlain ? { ...facts, format: "plain" } : facts, { attempt: n, result, retryInMs: retryInMs === null ? null : Math.max(retryInMs, minRetryGapMs) }, scope.scrub));
      asPlain ||= !result.ok && result.failure.refusedFormatting === true;
    },
    (ms) => scope.sleep(Math.max(ms, minRetryGapMs)),
  );
}
