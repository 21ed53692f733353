import * as z from "zod";

/**
 * An optional field of a platform's payload. Platforms send absent fields as
 * `null` as often as they omit them (Slack's `"bot_id": null` on a person's
 * upload): both read as absent, so a message is never dropped as malformed
 * for saying "none" one way rather than the other.
 */
export const absentOr = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v): z.output<T> | undefined => v ?? undefined);

/**
 * absentOr for a schema whose parsed values are also built directly (Discord's interactions, in tests): the field
 * stays an optional key of the parsed type, where absentOr's is a required one that may hold undefined.
 */
export const nullAsAbsent = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === null ? undefined : v), schema.optional());

/**
 * A payload with every object member whose value is `null` left out, at any depth (array items stay as they are):
 * what a platform says is absent by null reads as absent by omission, in every field a schema reads.
 */
export function withoutNulls<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item) => (item !== null && typeof item === "object" ? withoutNulls(item) : item)) as T;
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== null) out[k] = typeof v === "object" ? withoutNulls(v) : v;
  return out as T;
}
