import * as z from "zod";

/**
 * An optional field of a platform's payload. Platforms send absent fields as
 * `null` as often as they omit them (Slack's `"bot_id": null` on a person's
 * upload): both read as absent, so a message is never dropped as malformed
 * for saying "none" one way rather than the other.
 */
export const absentOr = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v): z.output<T> | undefined => v ?? undefined);
