/**
 * Shapes shared by every part of the runner protocol (PROTOCOL.md §5, §7):
 * JSON values, i18n labels, message content, artifact references, event names.
 *
 * Convention for optional fields across the protocol: `.nullish()`. Runners
 * written in Python (LangBot's SDK) dump `None` as `null`, and rows read from
 * libSQL carry `null` for absent columns; both mean "absent", not "malformed".
 */
import * as z from "zod";

/** Nesting limit for JSON values; deeper input would exhaust the stack of the recursive schema. */
export const MAX_JSON_DEPTH = 64;

/**
 * An id naming a conversation, thread, workspace, bot or actor: it becomes part of keys, URLs and SQL text, so
 * no control character (a NUL cuts it short when read back) and no lone surrogate (it cannot be encoded).
 */
export const ScopedIdSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[^\p{Cc}\p{Cs}]*$/u, "must not contain control characters or unpaired surrogates");

export type JsonValue =
  | string
  | number
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue };

// Recursive part; only reached after the iterative depth guard below has passed.
const JsonValueInnerSchema: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([
    z.string(),
    z.number(), // zod 4 rejects NaN and ±Infinity, which JSON cannot carry
    z.boolean(),
    z.null(),
    z.array(JsonValueInnerSchema),
    z.record(z.string(), JsonValueInnerSchema),
  ]),
);

/** Iterative so that hostile nesting cannot blow the stack before we refuse it. */
export function jsonDepthExceeds(value: unknown, maxDepth: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (current === null || typeof current !== "object") continue;
    if (depth > maxDepth) return true;
    const children = Array.isArray(current) ? current : Object.values(current);
    for (const child of children) stack.push([child, depth + 1]);
  }
  return false;
}

/** A check refusing a value nested deeper than `maxDepth`, before any recursive schema walks it. */
const nestedAtMost = (maxDepth: number) =>
  z.refine((v) => !jsonDepthExceeds(v, maxDepth), { message: `JSON nested deeper than ${maxDepth} levels`, abort: true });

/** Any JSON value (no undefined, functions, NaN, class instances), nested at most MAX_JSON_DEPTH. */
export const JsonValueSchema = z.unknown().check(nestedAtMost(MAX_JSON_DEPTH)).pipe(JsonValueInnerSchema);

/** UTF-8 size of a value once serialised; limits in the protocol are in bytes. */
export function jsonByteLength(value: unknown): number {
  return new TextEncoder().encode(JSON.stringify(value) ?? "").length;
}

export function utf8ByteLength(text: string): number {
  return new TextEncoder().encode(text).length;
}

/**
 * Free-form object bag (`metadata`, `data`, `config`, ...), nested at most
 * MAX_JSON_DEPTH: deeper input is refused here, not by a stack overflow when
 * it is cloned to a Durable Object or serialised.
 */
// One level more than a JSON value: the record's own, around values as deep as JsonValueSchema allows.
export const RecordSchema = z.record(z.string(), z.unknown()).check(nestedAtMost(MAX_JSON_DEPTH + 1));
export type JsonObject = z.infer<typeof RecordSchema>;

/** Localised text keyed by locale, e.g. {"en_US": "...", "zh_Hans": "..."}. */
export const I18nSchema = z.record(z.string(), z.string());
export type I18n = z.infer<typeof I18nSchema>;

/**
 * Timestamps the host produces: ISO 8601 strings in UTC (`Date#toISOString()`).
 * Parsed as plain strings so that a runner never fails a whole context on format.
 */
export const TimestampSchema = z.string().min(1);
export type Timestamp = z.infer<typeof TimestampSchema>;

export const TextElementSchema = z.object({
  type: z.literal("text"),
  text: z.string(),
});

export const ImageElementSchema = z
  .object({
    type: z.literal("image"),
    artifact_id: z.string().min(1).nullish(),
    // Only web URLs: anything else (javascript:, file:) has no business in a message.
    url: z.url({ protocol: /^https?$/ }).nullish(),
  })
  .refine((v) => Boolean(v.artifact_id) || Boolean(v.url), {
    message: "image needs artifact_id or url",
  });

export const FileElementSchema = z.object({
  type: z.literal("file"),
  artifact_id: z.string().min(1),
  name: z.string().nullish(),
});

export const AudioElementSchema = z.object({
  type: z.literal("audio"),
  artifact_id: z.string().min(1),
});

/** One element of multimodal content; binaries travel as artifact references. */
export const ContentElementSchema = z.discriminatedUnion("type", [
  TextElementSchema,
  ImageElementSchema,
  FileElementSchema,
  AudioElementSchema,
]);
export type ContentElement = z.infer<typeof ContentElementSchema>;
export type TextElement = z.infer<typeof TextElementSchema>;
export type ImageElement = z.infer<typeof ImageElementSchema>;
export type FileElement = z.infer<typeof FileElementSchema>;
export type AudioElement = z.infer<typeof AudioElementSchema>;

export const MessageContentSchema = z.union([z.string(), z.array(ContentElementSchema)]);
export type MessageContent = z.infer<typeof MessageContentSchema>;

export const MESSAGE_ROLES = ["user", "assistant", "system", "tool"] as const;
export const MessageRoleSchema = z.enum(MESSAGE_ROLES);
export type MessageRole = z.infer<typeof MessageRoleSchema>;

/** A deliverable message. Unknown keys are stripped: the host only delivers role and content. */
export const MessageSchema = z.object({
  role: MessageRoleSchema,
  content: MessageContentSchema,
});
export type Message = z.infer<typeof MessageSchema>;

/** A message with nothing in it but whitespace: no answer (PROTOCOL §7 results carrying one are dropped). */
export function isBlankMessage(message: Message): boolean {
  if (typeof message.content === "string") return message.content.trim() === "";
  return message.content.every((el) => el.type === "text" && el.text.trim() === "");
}

/**
 * A message sent to a model through the Host API. Keeps provider fields
 * (tool_calls, tool_call_id, name) and allows null content, as tool-calling
 * assistant turns have none; stripping those would break the runner's tool loop.
 */
export const ModelMessageSchema = z.looseObject({
  role: MessageRoleSchema,
  content: MessageContentSchema.nullish(),
});
export type ModelMessage = z.infer<typeof ModelMessageSchema>;

export const ArtifactRefSchema = z.object({
  artifact_id: z.string().min(1),
  artifact_type: z.string().nullish(),
  mime_type: z.string().nullish(),
  name: z.string().nullish(),
  size_bytes: z.int().nonnegative().nullish(),
});
export type ArtifactRef = z.infer<typeof ArtifactRefSchema>;

/** Stable event type names (§5). A platform's own name goes in `source_event_type`. */
export const EVENT_TYPES = [
  "message.received",
  "message.recalled",
  "group.member_joined",
  "friend.request_received",
  "schedule.triggered",
  "api.invoked",
] as const;
export const EventTypeSchema = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof EventTypeSchema>;

/** One-line rendering of zod issues, for warnings, audit records and 400 bodies. */
/** Structural, so it takes both zod's classic and core error types. */
export function formatZodIssues(error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] }): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.map(String).join(".");
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join("; ");
}
