/** Codes a run fails with when the host ends it (PROTOCOL §3, §7, §11). */
export type RunFailureCode =
  | "runner.http_error"
  | "runner.unreachable"
  | "runner.protocol_error"
  | "runner.stream_closed"
  | "runner.no_output"
  | "runner.line_too_large"
  | "runner.stream_too_large"
  | "deadline_exceeded"
  | "cancelled"
  | "host.session_lost"
  | "host.internal_error";

/** Why the host stopped reading a runner: ends that runner's run, nothing else. */
export class RunnerCallError extends Error {
  override readonly name = "RunnerCallError";
  constructor(
    readonly code: RunFailureCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
