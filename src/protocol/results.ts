/**
 * The runner's result stream (PROTOCOL.md §7): one AgentRunResult per NDJSON
 * line. The envelope is a single shape with a string `type` (not a
 * discriminated union) so that unknown types survive version skew; payloads
 * are validated per type afterwards with `parseResultPayload`.
 */
import * as z from "zod";
import {
  formatZodIssues,
  jsonByteLength,
  ExactJsonValueSchema,
  labelSchema,
  MediaTypeSchema,
  MessageSchema,
  nulFreeText,
  RecordSchema,
  refuseRoundedIntegers,
  storedKeyText,
} from "./common";
import { StateScopeSchema } from "./context";
import { withDigitsAsSent } from "../lib/exact-json";

/** Hard cap on `artifact.created.content_base64`, decoded; larger ones go through `artifact.upload`. */
export const ARTIFACT_INLINE_MAX_BYTES = 1024 * 1024;
/** Serialised size cap of one state value (§9); also enforced on `state.set`. */
export const STATE_VALUE_MAX_BYTES = 256 * 1024;
export const STATE_KEY_MAX_LENGTH = 256;

export const AgentRunResultSchema = z.object({
  run_id: z.string().min(1),
  // Stored in the ledger's type column: with a NUL it would read back as another type (say `run.completed`).
  type: nulFreeText().min(1),
  data: z.unknown().default({}),
  // Any integer: one below 1 (a runner counting from 0) is warned about and taken as unnumbered, not a protocol error.
  sequence: z.int().nullish(),
  timestamp: z.union([z.string(), z.number()]).nullish(),
});
export type AgentRunResult = z.infer<typeof AgentRunResultSchema>;

export const RESULT_TYPES = [
  "message.delta",
  "message.completed",
  "tool.call.started",
  "tool.call.completed",
  "artifact.created",
  "state.updated",
  "action.requested",
  "run.completed",
  "run.failed",
] as const;
export type ResultType = (typeof RESULT_TYPES)[number];

export const TERMINAL_RESULT_TYPES = ["run.completed", "run.failed"] as const;

/** Decoded size of a padded base64 string, without decoding it. */
export function base64DecodedLength(b64: string): number {
  const padding = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return (b64.length / 4) * 3 - padding;
}

export const StateKeySchema = storedKeyText(STATE_KEY_MAX_LENGTH);

/** A JSON value that fits in host state. */
export const StateValueSchema = ExactJsonValueSchema.refine(
  (v) => jsonByteLength(v) <= STATE_VALUE_MAX_BYTES,
  { message: `state value larger than ${STATE_VALUE_MAX_BYTES} bytes serialised` },
);

// Strict payloads: they cause delivery or host side effects, so unknown keys are refused too.

/** What a runner says is the assistant's (§7): a message in another role would pass for the user's in the transcript. */
const AssistantMessageSchema = MessageSchema.extend({ role: z.literal("assistant", { error: "a runner's message must have role assistant" }) });

export const MessageDeltaDataSchema = z.strictObject({ chunk: AssistantMessageSchema });
export type MessageDeltaData = z.infer<typeof MessageDeltaDataSchema>;

export const MessageCompletedDataSchema = z.strictObject({ message: AssistantMessageSchema });
export type MessageCompletedData = z.infer<typeof MessageCompletedDataSchema>;

// Labels as an upload's (artifact.upload): stored, shown and sent as headers, so never altered or cut.
export const ArtifactCreatedDataSchema = z.strictObject({
  artifact_type: labelSchema(64),
  artifact_id: z.string().min(1).max(200).nullish(),
  mime_type: MediaTypeSchema.nullish(),
  name: labelSchema(255).nullish(),
  size_bytes: z.int().nonnegative().nullish(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/i, "sha256 must be 64 hex digits").nullish(),
  // Stored with the artifact and given back by artifact.metadata: a 64-bit id in it is refused, never stored rounded.
  metadata: RecordSchema.superRefine(refuseRoundedIntegers).nullish(),
  content_base64: z
    .base64()
    .refine((b64) => base64DecodedLength(b64) <= ARTIFACT_INLINE_MAX_BYTES, {
      message: `inline artifact larger than ${ARTIFACT_INLINE_MAX_BYTES} bytes; upload it with artifact.upload`,
    })
    .nullish(),
});
export type ArtifactCreatedData = z.infer<typeof ArtifactCreatedDataSchema>;

export const StateUpdatedDataSchema = z.strictObject({
  scope: StateScopeSchema,
  key: StateKeySchema,
  value: StateValueSchema,
});
export type StateUpdatedData = z.infer<typeof StateUpdatedDataSchema>;

/** Recorded only; the v1 host never executes actions. */
export const ActionRequestedDataSchema = z.strictObject({
  action: z.string().min(1),
  target: RecordSchema.nullish(),
  payload: RecordSchema.nullish(),
});
export type ActionRequestedData = z.infer<typeof ActionRequestedDataSchema>;

export const RunCompletedDataSchema = z.strictObject({
  finish_reason: nulFreeText().min(1),
  // Any role parses, so the run still completes; a message in another role is dropped on its own (ResultProcessor).
  message: MessageSchema.nullish(),
});
export type RunCompletedData = z.infer<typeof RunCompletedDataSchema>;

export const RunFailedDataSchema = z.strictObject({
  code: nulFreeText().min(1),
  error: nulFreeText(),
  retryable: z.boolean(),
});
export type RunFailedData = z.infer<typeof RunFailedDataSchema>;

// Loose payloads: telemetry only, so extra keys pass through and the rest is barely checked.

export const ToolCallStartedDataSchema = z.looseObject({
  tool_call_id: z.string(),
  tool_name: z.string(),
  parameters: z.unknown().optional(),
});
export type ToolCallStartedData = z.infer<typeof ToolCallStartedDataSchema>;

export const ToolCallCompletedDataSchema = z.looseObject({
  tool_call_id: z.string(),
  tool_name: z.string(),
  result: z.unknown().optional(),
  error: z.unknown().optional(),
});
export type ToolCallCompletedData = z.infer<typeof ToolCallCompletedDataSchema>;

export const RESULT_PAYLOAD_SCHEMAS = {
  "message.delta": MessageDeltaDataSchema,
  "message.completed": MessageCompletedDataSchema,
  "tool.call.started": ToolCallStartedDataSchema,
  "tool.call.completed": ToolCallCompletedDataSchema,
  "artifact.created": ArtifactCreatedDataSchema,
  "state.updated": StateUpdatedDataSchema,
  "action.requested": ActionRequestedDataSchema,
  "run.completed": RunCompletedDataSchema,
  "run.failed": RunFailedDataSchema,
} as const satisfies Record<ResultType, z.ZodType>;

/** Types whose invalid payloads are dropped with a warning and an audit record. */
export const STRICT_RESULT_TYPES: ReadonlySet<ResultType> = new Set<ResultType>(
  RESULT_TYPES.filter((t) => t !== "tool.call.started" && t !== "tool.call.completed"),
);

export type ResultPayload<T extends ResultType> = z.output<(typeof RESULT_PAYLOAD_SCHEMAS)[T]>;

/** A result of a known type with its validated payload; narrow on `type`. */
export type KnownResult = { [T in ResultType]: { type: T; data: ResultPayload<T> } }[ResultType];

export type ParsedResultPayload =
  | { kind: "ok"; result: KnownResult }
  | { kind: "invalid"; type: ResultType; issues: string }
  | { kind: "unknown"; type: string };

export function isResultType(type: string): type is ResultType {
  return Object.hasOwn(RESULT_PAYLOAD_SCHEMAS, type);
}

/**
 * Validate `data` against its type's schema; unknown types are reported, not failed. `line`, the result line `data`
 * was parsed from, lets a refused number be named as the runner wrote it.
 */
export function parseResultPayload(type: string, data: unknown, line?: string): ParsedResultPayload {
  if (!isResultType(type)) return { kind: "unknown", type };
  const parsed = RESULT_PAYLOAD_SCHEMAS[type].safeParse(data);
  if (!parsed.success) {
    const issues = line === undefined ? parsed.error.issues : withDigitsAsSent(parsed.error.issues, line, ["data"]);
    return { kind: "invalid", type, issues: formatZodIssues({ issues }) };
  }
  // The schema was looked up by `type`, so the pair is consistent; TS cannot correlate the two.
  return { kind: "ok", result: { type, data: parsed.data } as KnownResult };
}
