import { ApiError } from "./errors";

/**
 * Bytes of upstream answers held now by the calls of this isolate, every run's together: a Durable Object's
 * memory (128 MB) is its isolate's, and one answer may take a few times its size before its call is answered
 * (its text, the value parsed from it, the reply made of that).
 */
let held = 0;

/** One call's share of the budget: what it took is given back when the call is over, however it ended. */
export interface AnswerHold {
  /** `bytes` more of an answer read; throws a retryable 429 when they would take the isolate past its budget. */
  take(bytes: number): void;
  release(): void;
}

export function answerHold(limit: number): AnswerHold {
  let mine = 0;
  return {
    take(bytes) {
      if (held + bytes > limit) {
        throw new ApiError("rate_limited", `the host already holds as many upstream answers as it may (${limit} bytes, RESOURCE_RESPONSE_BUDGET_BYTES); try again once other calls are answered`, {
          retryable: true,
          details: { limit },
        });
      }
      held += bytes;
      mine += bytes;
    },
    release() {
      held -= mine;
      mine = 0;
    },
  };
}
