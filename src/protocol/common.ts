/**
 * Shapes shared by every part of the runner protocol (PROTOCOL.md §5, §7):
 * JSON values, i18n labels, message content, artifact references, event names.
 *
 * Convention for optional fields across the protocol: `.nullish()`. Runners
 * written in Python (LangBot's SDK) dump `None` as `null`, and rows read from
 * libSQL carry `null` for absent columns; both mean "absent", not "malformed".
 */
import * as z from "zod";
import { isRoundedWhole, keptIntegerText, numberIn, ROUNDED_INTEGER_ISSUE, roundedIntegerMessage } from "../lib/exact-json";

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

/**
 * Text stored as a key and read back (state keys, storage keys): no NUL (the
 * embedded driver cuts text short at it when reading) and no unpaired
 * surrogate (stored as U+FFFD, so two keys would become one).
 */
export const storedKeyText = (maxLength: number) =>
  z
    .string()
    .min(1)
    .max(maxLength)
    .regex(/^[^\u0000\p{Cs}]*$/u, "must not contain NUL or unpaired surrogates");

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

/**
 * Why a value cannot be taken as JSON here, or null: nested deeper than
 * `maxDepth`, or (unless `depthOnly`) holding an object member named "__proto__"
 * (zod's records drop it, so the value would be stored altered without a word).
 * Iterative, so that hostile nesting cannot blow the stack before it is refused.
 */
export function jsonShapeProblem(value: unknown, maxDepth: number, opts: { depthOnly?: boolean } = {}): string | null {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    // A whole number an upstream's answer keeps as written (a raw JSON value) is a number, not a level.
    if (current === null || typeof current !== "object" || keptIntegerText(current) !== undefined) continue;
    if (depth > maxDepth) return `JSON nested deeper than ${maxDepth} levels`;
    if (!opts.depthOnly && !Array.isArray(current) && Object.hasOwn(current, "__proto__")) return 'an object member named "__proto__" is not accepted';
    const children = Array.isArray(current) ? current : Object.values(current);
    for (const child of children) stack.push([child, depth + 1]);
  }
  return null;
}

/** A check refusing a value nested deeper than `maxDepth` (or with a "__proto__" member), before any recursive schema walks it. */
const nestedAtMost = (maxDepth: number) =>
  z.unknown().superRefine((v, ctx) => {
    const problem = jsonShapeProblem(v, maxDepth);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

/** Any JSON value (no undefined, functions, NaN, class instances), nested at most MAX_JSON_DEPTH. */
export const JsonValueSchema = nestedAtMost(MAX_JSON_DEPTH).pipe(JsonValueInnerSchema);

/**
 * The first whole number in a (parsed) JSON value beyond ±(2^53 − 1) but within 64 bits, or null. Parsing already
 * rounded it (a 64-bit id such as a Discord snowflake comes out as a neighbour): kept, it would be stored altered
 * without a word. Larger magnitudes are left alone: they are floating-point quantities, not ids.
 */
export const unsafeIntegerIn = (value: unknown): number | null =>
  // A number past the double range (1e400) parses as ±Infinity, which JSON cannot carry: it would be kept as null.
  numberIn(value, (n) => !Number.isFinite(n) || isRoundedWhole(n));

/** A zod refinement for a value kept as sent: one whose numbers JSON parsing may have rounded is refused, with what to send instead. */
export function refuseRoundedIntegers(value: unknown, ctx: z.RefinementCtx): void {
  const unsafe = unsafeIntegerIn(value);
  if (unsafe === null) return;
  // Named by its parsed value here; where the text is at hand, withDigitsAsSent names the digits sent instead.
  if (Number.isFinite(unsafe)) ctx.addIssue({ code: "custom", message: roundedIntegerMessage(String(unsafe)), params: ROUNDED_INTEGER_ISSUE });
  else ctx.addIssue({ code: "custom", message: "a number beyond the range of a double (it parses as infinity) cannot be kept; send it as a string" });
}

/** A JSON value to keep as sent (state). */
export const ExactJsonValueSchema = JsonValueSchema.superRefine(refuseRoundedIntegers);

/** UTF-8 size of a value once serialised; limits in the protocol are in bytes. */
export function jsonByteLength(value: unknown): number {
  return new TextEncoder().encode(JSON.stringify(value) ?? "").length;
}

export function utf8ByteLength(text: string): number {
  return new TextEncoder().encode(text).length;
}

/**
 * An optional field with a default that also takes null for "absent": callers
 * written in Python or Go send `None`/`nil` for what they leave unset, and a
 * 400 for that helps nobody. (zod's `.default()` applies to undefined only.)
 */
export function orDefault<T extends z.ZodType>(schema: T, fallback: z.output<T>) {
  // Each parse gets its own copy of an object default, as with `.default()`: none shares another's.
  return schema.nullish().transform((v): z.output<T> => v ?? (typeof fallback === "object" && fallback !== null ? structuredClone(fallback) : fallback));
}

/**
 * Free-form object bag (`metadata`, `data`, `config`, ...), nested at most
 * MAX_JSON_DEPTH: deeper input is refused here, not by a stack overflow when
 * it is cloned to a Durable Object or serialised.
 */
// One level more than a JSON value: the record's own, around values as deep as JsonValueSchema allows.
export const RecordSchema = nestedAtMost(MAX_JSON_DEPTH + 1).pipe(z.record(z.string(), z.unknown()));
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

/**
 * Free text stored in a column of its own and read back (transcript text, an
 * actor's name, a run's error): no NUL, at which the embedded driver cuts
 * text short when reading, so what is shown back would be less than was sent,
 * and no unpaired surrogate (a JSON `\ud800`), which UTF-8 cannot hold and comes back as U+FFFD.
 */
export const nulFreeText = () => z.string().regex(/^[^\u0000\p{Cs}]*$/u, "must not contain NUL characters or unpaired surrogates");
export const MessageTextSchema = nulFreeText();

export const TextElementSchema = z.object({
  type: z.literal("text"),
  text: MessageTextSchema,
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

/** The text elements of `elements`, concatenated: what a message made of parts says, for the transcript and search. */
export function textOfElements(elements: readonly ContentElement[]): string {
  return elements.map((el) => (el.type === "text" ? el.text : "")).join("");
}
export type ImageElement = z.infer<typeof ImageElementSchema>;
export type FileElement = z.infer<typeof FileElementSchema>;
export type AudioElement = z.infer<typeof AudioElementSchema>;

/**
 * Message text stored as a column of its own (transcript content): no NUL, at
 * which the embedded driver cuts text short when reading it back, so the
 * transcript would hold less than was said.
 */
const LABEL_TEXT = /^[^\p{Cc}\p{Cs}]*$/u;
const MEDIA_TYPE = /^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(\s*;.*)?$/;

/** A name or type stored and shown back as given: no control character (a NUL cuts it short when read back) and no unpaired surrogate. */
export const labelSchema = (maxLength: number) => z.string().min(1).max(maxLength).regex(LABEL_TEXT, "must not contain control characters or unpaired surrogates");
/** A media type (`type/subtype`, parameters allowed): it becomes a stored object's Content-Type. */
export const MediaTypeSchema = labelSchema(255).regex(MEDIA_TYPE, "must be a media type such as text/plain");

/** A name from elsewhere (a URL's path, a platform's file): kept only when it could have been given as a label, else null. */
export const labelOrNull = (value: string | null | undefined, maxLength: number): string | null => (value && value.length <= maxLength && LABEL_TEXT.test(value) ? value : null);
/** A media type from elsewhere (a fetched Content-Type, a platform's file): kept only when it is one, else null. */
export const mediaTypeOrNull = (value: string | null | undefined): string | null => (labelOrNull(value, 255) && MEDIA_TYPE.test(value!) ? value! : null);


export const MessageContentSchema = z.union([MessageTextSchema, z.array(ContentElementSchema)]);
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
