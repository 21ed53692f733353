/**
 * Error shapes (PROTOCOL.md §8 "Errors", §3, §11): Host API errors returned to
 * runners, and the failure codes the host records on `run.failed`.
 */
import * as z from "zod";
import { RecordSchema } from "./common";

export const API_ERROR_CODES = [
  "unauthorized",
  "not_found",
  "deadline_exceeded",
  "payload_too_large",
  "rate_limited",
  "invalid_argument",
  "runtime_error",
] as const;
export const ApiErrorCodeSchema = z.enum(API_ERROR_CODES);
export type ApiErrorCode = z.infer<typeof ApiErrorCodeSchema>;

/**
 * Default HTTP status per code. §8 also allows 401 for `unauthorized` when the
 * bearer token itself is bad or expired (UNAUTHENTICATED_STATUS) and 502 for a
 * `runtime_error` caused by a downstream provider (UPSTREAM_ERROR_STATUS).
 */
export const API_ERROR_STATUS = {
  unauthorized: 403,
  not_found: 404,
  deadline_exceeded: 408,
  payload_too_large: 413,
  rate_limited: 429,
  invalid_argument: 400,
  runtime_error: 500,
} as const satisfies Record<ApiErrorCode, number>;
export const UNAUTHENTICATED_STATUS = 401;
export const UPSTREAM_ERROR_STATUS = 502;

export const AgentAPIErrorSchema = z.object({
  code: ApiErrorCodeSchema,
  message: z.string(),
  retryable: z.boolean().default(false),
  details: RecordSchema.default({}),
});
export type AgentAPIError = z.infer<typeof AgentAPIErrorSchema>;

export function makeApiError(
  code: ApiErrorCode,
  message: string,
  options: { retryable?: boolean; details?: Record<string, unknown> } = {},
): AgentAPIError {
  // Only throttling is worth retrying by default; other codes do not change on a retry.
  const retryable = options.retryable ?? code === "rate_limited";
  return { code, message, retryable, details: options.details ?? {} };
}

export const HostApiSuccessSchema = z.object({ ok: z.literal(true), data: z.unknown() });
export type HostApiSuccess = z.infer<typeof HostApiSuccessSchema>;

export const HostApiErrorResponseSchema = z.object({
  ok: z.literal(false),
  error: AgentAPIErrorSchema,
});
export type HostApiErrorResponse = z.infer<typeof HostApiErrorResponseSchema>;

/** Body of every Host API answer; `data`'s shape depends on the action (host-api-results.ts). */
export const HostApiResponseSchema = z.discriminatedUnion("ok", [
  HostApiSuccessSchema,
  HostApiErrorResponseSchema,
]);
export type HostApiResponse = z.infer<typeof HostApiResponseSchema>;

/** Codes the host itself writes into `run.failed` when it ends a run. */
export const RUN_FAILURE_CODES = {
  protocolError: "runner.protocol_error", // body is not a stream of results
  httpError: "runner.http_error", // non-2xx answer
  streamClosed: "runner.stream_closed", // closed without a terminal result
  noOutput: "runner.no_output", // ended without any message or failure
  lineTooLarge: "runner.line_too_large",
  streamTooLarge: "runner.stream_too_large",
  tooManyMessages: "runner.too_many_messages", // more message.completed results than RUN_MAX_MESSAGES
  tooManyStateUpdates: "runner.too_many_state_updates", // more state writes (results and state.set) than RUN_MAX_STATE_UPDATES
  tooManyResults: "runner.too_many_results", // more result lines than RUN_MAX_RESULTS
  deadlineExceeded: "deadline_exceeded",
  cancelled: "cancelled",
  sessionLost: "host.session_lost", // the owning host instance lost the run's state
  unreachable: "runner.unreachable", // connection failed before any answer
  internalError: "host.internal_error", // the host itself failed while running
  agentUnavailable: "host.agent_unavailable", // the run's agent was deleted or disabled before the run started
} as const;
export const RUN_FAILURE_CODE_VALUES = [
  RUN_FAILURE_CODES.protocolError,
  RUN_FAILURE_CODES.httpError,
  RUN_FAILURE_CODES.streamClosed,
  RUN_FAILURE_CODES.noOutput,
  RUN_FAILURE_CODES.lineTooLarge,
  RUN_FAILURE_CODES.streamTooLarge,
  RUN_FAILURE_CODES.tooManyMessages,
  RUN_FAILURE_CODES.tooManyStateUpdates,
  RUN_FAILURE_CODES.tooManyResults,
  RUN_FAILURE_CODES.deadlineExceeded,
  RUN_FAILURE_CODES.cancelled,
  RUN_FAILURE_CODES.sessionLost,
  RUN_FAILURE_CODES.unreachable,
  RUN_FAILURE_CODES.internalError,
  RUN_FAILURE_CODES.agentUnavailable,
] as const;
export const RunFailureCodeSchema = z.enum(RUN_FAILURE_CODE_VALUES);
export type RunFailureCode = z.infer<typeof RunFailureCodeSchema>;
