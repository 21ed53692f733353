import { RunnerCallError } from "../runner/errors";
import type { ActionContext } from "./actions/context";
import { ApiError } from "./errors";

export interface CallSignal {
  signal: AbortSignal;
  /** Stop the call now (the runner went away). */
  abort(): void;
  /** Release the timers once the call is over. */
  dispose(): void;
}

/**
 * The signal for one outbound call of a Host API action: aborted with a
 * Host API error as its reason when the run's deadline passes, the run ends,
 * or the call's own timeout (if any) expires first.
 */
export function callSignal(ctx: ActionContext, timeout?: { ms: number; what: string }): CallSignal {
  const controller = new AbortController();
  const stop = (reason: ApiError) => {
    if (!controller.signal.aborted) controller.abort(reason);
  };
  const timers: ReturnType<typeof setTimeout>[] = [];
  const after = (ms: number, reason: () => ApiError) => timers.push(setTimeout(() => stop(reason()), Math.max(0, ms)));

  const pastDeadline = () => new ApiError("deadline_exceeded", "the run's deadline passed during the call");
  const untilDeadline = ctx.snapshot.deadlineAt - Date.now();
  after(untilDeadline, pastDeadline);
  if (timeout && timeout.ms < untilDeadline) after(timeout.ms, () => new ApiError("deadline_exceeded", `${timeout.what} did not answer within ${timeout.ms} ms`));
  // The run's own deadline timer usually fires first: keep its reason.
  const runEnded = () => {
    const reason: unknown = ctx.signal.reason;
    stop(reason instanceof RunnerCallError && reason.code === "deadline_exceeded" ? pastDeadline() : new ApiError("runtime_error", "the run was stopped during the call"));
  };
  if (ctx.signal.aborted) runEnded();
  else ctx.signal.addEventListener("abort", runEnded, { once: true });

  return {
    signal: controller.signal,
    abort: () => stop(new ApiError("runtime_error", "the caller went away")),
    dispose() {
      for (const t of timers) clearTimeout(t);
      ctx.signal.removeEventListener("abort", runEnded);
    },
  };
}
