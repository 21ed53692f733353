/**
 * The message a message command was used on, as the runner reads it. Its words are not only its `content`: a forwarded
 * message carries none of its own (what was forwarded is in `message_snapshots`), and a bot's or webhook's post often
 * says everything in embeds (a title, a description, fields); a poll or a sticker has no words at all. Read from
 * `content` alone, "Summarize" on any of them would hand the agent nothing but the command's name. Embeds, snapshots,
 * polls and stickers are read leniently: a shape this host does not know is skipped, never a reason to drop the whole
 * interaction.
 */
import * as z from "zod";
import { nullAsAbsent } from "../payload";
import { artifactTypeOf } from "../../artifacts/policy";
import type { PlatformFile } from "../types";
import { memberName, UserSchema } from "./names";
import { pollText, stickersText } from "./non-text";

export const AttachmentSchema = z.looseObject({ url: z.string(), filename: nullAsAbsent(z.string()), content_type: nullAsAbsent(z.string()) });
type Attachment = z.infer<typeof AttachmentSchema>;

export const fileOf = (a: Attachment): PlatformFile => ({ ref: a.url, name: a.filename, mimeType: a.content_type, artifactType: artifactTypeOf(a.content_type) as PlatformFile["artifactType"] });

export const TargetMessageSchema = z.looseObject({
  id: z.string(),
  content: z.string().nullish(),
  author: UserSchema.nullish(),
  attachments: z.array(AttachmentSchema).nullish(),
  embeds: z.array(z.unknown()).nullish(),
  mentions: z.array(z.unknown()).nullish(),
  message_snapshots: z.array(z.unknown()).nullish(),
  poll: z.unknown().optional(),
  sticker_items: z.array(z.unknown()).nullish().catch(null),
});
type TargetMessage = z.infer<typeof TargetMessageSchema>;

const text = z.string().nullish().catch(null);
const EmbedSchema = z.looseObject({
  type: text,
  title: text,
  url: text,
  description: text,
  author: z.looseObject({ name: text }).nullish().catch(null),
  fields: z.array(z.looseObject({ name: text, value: text })).nullish().catch(null),
  footer: z.looseObject({ text }).nullish().catch(null),
});
/** A forward's copy of the message it forwards (a subset of a message's fields: no author). */
const SnapshotSchema = z.looseObject({
  message: z.looseObject({
    content: text,
    attachments: z.array(AttachmentSchema).nullish().catch(null),
    embeds: z.array(z.unknown()).nullish().catch(null),
    mentions: z.array(z.unknown()).nullish().catch(null),
    sticker_items: z.array(z.unknown()).nullish().catch(null),
  }),
});
/** A user the message mentions, with their member's nickname where the server gave it. */
const MentionSchema = UserSchema.extend({ member: z.looseObject({ nick: text }).nullish().catch(null) });

/**
 * `<@id>` as the server shows it, `@nickname`, for the users the message mentions (Discord lists them with it), as a
 * command's picked users read: a bare snowflake means nothing to the agent. Roles and channels come without names and stay.
 */
function withMentionNames(content: string, mentions: readonly unknown[] | null | undefined): string {
  const names = new Map<string, string>();
  for (const raw of mentions ?? []) {
    const u = MentionSchema.safeParse(raw);
    const name = u.success ? memberName(u.data, u.data.member?.nick) : null;
    if (u.success && name) names.set(u.data.id, name);
  }
  return names.size ? content.replace(/<@!?(\d+)>/g, (markup, id: string) => (names.has(id) ? `@${names.get(id)}` : markup)) : content;
}

/**
 * An embed as lines of text: its author, title (a link's target after it, as links read elsewhere), description, fields,
 * footer. Only one a bot or webhook wrote ("rich", Discord's default): a link's preview is Discord's, not what was said.
 */
function embedText(raw: unknown): string {
  const e = EmbedSchema.safeParse(raw);
  if (!e.success || (e.data.type && e.data.type !== "rich")) return "";
  const { author, title, url, description, fields, footer } = e.data;
  const heading = title && url ? `${title} (${url})` : title;
  const lines = [author?.name, heading, description, ...(fields ?? []).map((f) => [f.name, f.value].filter(Boolean).join(": ")), footer?.text];
  return lines.filter((l): l is string => Boolean(l?.trim())).join("\n");
}

type Said = { content?: string | null; embeds?: readonly unknown[] | null; mentions?: readonly unknown[] | null; poll?: unknown; sticker_items?: readonly unknown[] | null };
/** A message's words: its content (mentions by name), each embed's text, its poll, its stickers (./non-text.ts), a blank line between. */
const wordsOf = (m: Said) =>
  [withMentionNames(m.content ?? "", m.mentions), ...(m.embeds ?? []).map(embedText), pollText(m.poll), stickersText(m.sticker_items)].filter((t) => t.trim()).join("\n\n");

/** What the target message says and carries: its own words and files, then those of each message it forwards. */
export function targetMessageInput(m: TargetMessage): { text: string; files: PlatformFile[]; forwarded: boolean } {
  const snapshots = (m.message_snapshots ?? []).flatMap((s) => {
    const parsed = SnapshotSchema.safeParse(s);
    return parsed.success ? [parsed.data.message] : [];
  });
  const texts = [wordsOf(m), ...snapshots.map(wordsOf)].filter(Boolean);
  const files = [...(m.attachments ?? []), ...snapshots.flatMap((s) => s.attachments ?? [])].map(fileOf);
  return { text: texts.join("\n\n"), files, forwarded: snapshots.length > 0 };
}
