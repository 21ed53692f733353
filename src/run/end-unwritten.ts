import { describeError } from "../lib/describe-error";
import type { UnloggedEnd } from "./end-log";

/**
 * The run's own end could not be written (refused past its tries, or no answer): what the host's end of it
 * (endRunAfterHostFailure) needs of the run that only this instance knows. Its message is its cause's, as logged.
 */
export class RunEndUnwritten extends Error {
  override readonly name = "RunEndUnwritten";
  constructor(
    cause: unknown,
    /** The run's drops, audited or not, those of writes never applied included (ResultProcessor.dropsSeen). */
    readonly dropsSeen: number,
    /**
     * The blobs of writes that may not have been applied (that end's, a batch's that got no answer): once the host's
     * end is recorded, those no artifact row names never will be (unnamed-blobs.ts).
     */
    readonly blobs: string[] = [],
    /** The log line of that end, for the host to log should it learn the end was applied (its answer lost). */
    readonly unlogged?: UnloggedEnd,
  ) {
    super(describeError(cause), { cause });
  }
}
