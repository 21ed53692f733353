import { storableText } from "../lib/text";
import type { RunFailureCode } from "../protocol/errors";

export type { RunFailureCode };

/**
 * Why the host stopped reading a runner: ends that runner's run, nothing else. `retryable`: the same event sent again
 * may well run (the runner could not be reached, or answered that it was overloaded or failing for now), as the run's
 * `run.failed` says (PROTOCOL §7); false for what a retry would meet again.
 */
export class RunnerCallError extends Error {
  override readonly name = "RunnerCallError";
  readonly retryable: boolean;
  constructor(
    readonly code: RunFailureCode,
    message: string,
    options?: { cause?: unknown; retryable?: boolean },
  ) {
    // Stored as the run's error: a runner's text quoted in it (a bad line, a run id) must read back as recorded.
    super(storableText(message), options);
    this.retryable = options?.retryable ?? false;
  }
}


/** The abort reason of a run that ended normally: one shared instance, as building an Error (and its stack) per run costs. */
export const RUN_ENDED = new RunnerCallError("cancelled", "the run has ended");
