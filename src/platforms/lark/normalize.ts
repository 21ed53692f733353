/**
 * Lark/Feishu events (schema 2.0) in the host's terms. Identity: a chat is a
 * conversation (`chat_id`); a topic thread is its thread (`thread_id`), and
 * replies go to the user's message (in its thread when it has one).
 */
import * as z from "zod";
import type { NormalizedEvent, PlatformFile } from "../types";
import { unhandledEvent as unhandled } from "../unhandled";
import { platformTime } from "../../lib/json";
import { absentOr, withoutNulls } from "../payload";
import { asRecord } from "../http";
import { parseNested } from "../verify";
import { CARD_ACTION, normalizeCardAction } from "./card-action";
import { unreadReply } from "../reply-context";
import { addressedOnLark } from "./addressed";
import { FORWARD_UNREAD, nonTextData, nonTextOf } from "./non-text";

const HeaderSchema = z.looseObject({ event_id: z.string().min(1), event_type: z.string(), create_time: z.string().optional() });

const UserIdSchema = z.looseObject({ open_id: z.string().optional(), user_id: z.string().nullish(), union_id: z.string().optional() });

const ReceiveSchema = z.looseObject({
  sender: z.looseObject({ sender_id: UserIdSchema.optional(), sender_type: z.string().optional() }),
  message: z.looseObject({
    message_id: z.string(),
    root_id: absentOr(z.string()),
    parent_id: absentOr(z.string()),
    thread_id: absentOr(z.string()),
    chat_id: z.string(),
    chat_type: absentOr(z.string()),
    message_type: z.string(),
    content: z.string(),
    mentions: absentOr(z.array(z.looseObject({ key: z.string(), name: z.string().optional(), id: UserIdSchema.optional() }))),
  }),
});

const RecalledSchema = z.looseObject({ message_id: z.string(), chat_id: z.string(), recall_type: z.string().optional() });

const AddedSchema = z.looseObject({
  chat_id: z.string(),
  operator_id: UserIdSchema.optional(),
  users: z.array(z.looseObject({ name: z.string().optional(), user_id: UserIdSchema })),
});

/** Whether a payload is a message that mentions someone: only then is the bot's own open_id needed (./own-open-id.ts). */
export function mentionsSomeone(given: Record<string, unknown>): boolean {
  const r = ReceiveSchema.safeParse(withoutNulls(given).event);
  return r.success && (r.data.message.mentions?.length ?? 0) > 0;
}

/**
 * v2 events carry `header`; v1 callbacks (`uuid`, `event.type`) are recorded only. `self.openId`: the bot's own
 * open_id when known, so a message's leading mention of it is left out of the text.
 */
export function normalizeLarkPayload(given: Record<string, unknown>, fallbackKey: string, self: { openId?: string | null } = {}): NormalizedEvent[] {
  // A field sent as null counts as absent (README).
  const payload = withoutNulls(given);
  const header = HeaderSchema.safeParse(payload.header);
  if (!header.success) {
    const key = typeof payload.uuid === "string" ? payload.uuid : fallbackKey;
    return [unhandled(key, typeof payload.type === "string" ? payload.type : "unknown")];
  }
  const { event_id: key, event_type: type, create_time } = header.data;
  const eventTime = create_time && /^\d+$/.test(create_time) ? platformTime(Number(create_time)) : undefined;
  const base = { eventTime, data: { lark_event_id: key, tenant_key: (payload.header as Record<string, unknown>).tenant_key ?? null } };

  if (type === "im.message.receive_v1") {
    const r = ReceiveSchema.safeParse(payload.event);
    if (!r.success) return [unhandled(key, type)];
    const { sender, message: m } = r.data;
    // An empty id is none (Lark's samples send "" for a root or parent a message lacks): no thread to reply in.
    const threadId = m.thread_id || null;
    // The placeholders that mention the bot itself (each mention has its own, the bot's too).
    const ownKeys = new Set(self.openId ? (m.mentions ?? []).filter((x) => x.id?.open_id === self.openId).map((x) => x.key) : []);
    const content = contentOf(m.message_type, m.content, m.mentions, ownKeys);
    // What a text message says as sent, its placeholders in place.
    const rawText = m.message_type === "text" ? content.text : null;
    if (m.message_type === "text") content.text = withMentionNames(withoutOwnLeadingMentions(content.text, m.mentions, ownKeys), m.mentions);
    // Messages of other apps (and our own) never start a run.
    if (sender.sender_type !== "user" || (content.text === null && content.files.length === 0)) return [{ ...unhandled(key, type), conversationId: m.chat_id, threadId }];
    return [
      {
        ...base,
        key,
        eventType: "message.received",
        sourceEventType: type,
        conversationId: m.chat_id,
        threadId,
        actor: { actor_type: "user", actor_id: sender.sender_id?.open_id ?? null, actor_name: null, metadata: idsOf(sender.sender_id) },
        text: content.text,
        files: content.files,
        // What it replies to is named by id only: read at ingress (readReplied), in the time its files have.
        data: { ...base.data, message_id: m.message_id, chat_type: m.chat_type ?? null, message_type: m.message_type, root_id: m.root_id ?? null, parent_id: m.parent_id ?? null, mentions: m.mentions ?? [], raw_text: rawText, reply_to: m.parent_id ? unreadReply(m.parent_id, "not read") : null, ...nonTextData(m.message_type, m.content) },
        ...(m.parent_id ? { repliesTo: m.parent_id } : {}),
        replyTarget: { platform: "lark", chatId: m.chat_id, replyToMessageId: m.message_id, replyInThread: threadId !== null, threadRootId: threadId !== null ? (m.root_id ?? null) : null },
        addressed: addressedOnLark(m.chat_type, m.mentions, self.openId),
        // A merged forward's event carries none of its messages: they are read before it is recorded (./forwarded.ts).
        ...(m.message_type === "merge_forward" ? { unread: true } : {}),
      },
    ];
  }
  if (type === "im.message.recalled_v1") {
    const r = RecalledSchema.safeParse(payload.event);
    if (!r.success) return [unhandled(key, type)];
    return [{ ...unhandled(key, type), ...base, eventType: "message.recalled", conversationId: r.data.chat_id, data: { ...base.data, message_id: r.data.message_id, recall_type: r.data.recall_type ?? null }, revises: { field: "message_id", id: r.data.message_id } }];
  }
  if (type === "im.chat.member.user.added_v1") {
    const r = AddedSchema.safeParse(payload.event);
    if (!r.success) return [unhandled(key, type)];
    return r.data.users.map((u, i) => ({
      ...unhandled(`${key}:${u.user_id.open_id ?? i}`, type),
      ...base,
      eventType: "group.member_joined" as const,
      conversationId: r.data.chat_id,
      actor: { actor_type: "user", actor_id: u.user_id.open_id ?? null, actor_name: u.name ?? null, metadata: idsOf(u.user_id) },
      data: { ...base.data, operator_open_id: r.data.operator_id?.open_id ?? null },
      // A welcome goes to the chat as a new message.
      replyTarget: { platform: "lark" as const, chatId: r.data.chat_id, replyToMessageId: null, replyInThread: false },
    }));
  }
  if (type === CARD_ACTION) return [normalizeCardAction(key, payload.event, { create_time, tenant_key: (payload.header as Record<string, unknown>).tenant_key })];
  const chatId = (payload.event as Record<string, unknown> | undefined)?.chat_id;
  return [{ ...unhandled(key, type), conversationId: typeof chatId === "string" ? chatId : null }];
}

type Mention = { key: string; name?: string };

/** The placeholder a text starts with, if any (`keys` longest first): `@_user_1` directly followed by a digit is another one (`@_user_10`). */
const leadingKey = (text: string, keys: string[]) => keys.find((k) => text.startsWith(k) && !/^\d/.test(text.slice(k.length)));

/**
 * The text without the bot's own mentions (`own`: their placeholders) among those it starts with, each with the `,`
 * `:` and spaces after it, so "@Bot hi" reads "hi" and "@Ada @Bot hi" reads "@Ada hi"; as sent when nothing follows
 * those mentions, so a bare ping still says the bot was called.
 */
function withoutOwnLeadingMentions(text: string | null, mentions: Mention[] = [], own: ReadonlySet<string>): string | null {
  if (!text || own.size === 0) return text;
  const keys = mentions.map((x) => x.key).sort((a, b) => b.length - a.length);
  let rest = text;
  let kept = "";
  let ours = false;
  for (let key = leadingKey(rest, keys); key; key = leadingKey(rest, keys)) {
    const taken = key.length + (/^[\s,:]*/.exec(rest.slice(key.length))?.[0].length ?? 0);
    if (own.has(key)) ours = true;
    else kept += rest.slice(0, taken);
    rest = rest.slice(taken);
  }
  return ours && rest ? kept + rest : text;
}

/** A text message names what it mentions by placeholder (`@_user_1`, `@_all`); the runner reads the names instead. */
export function withMentionNames(text: string | null, mentions: Mention[] = []): string | null {
  const names = new Map(mentions.filter((m) => m.name && m.key.startsWith("@_")).map((m) => [m.key, `@${m.name}`]));
  if (!text || names.size === 0) return text;
  // The keys themselves, longest first: `@_user_1` directly followed by digits is still that mention, and `@_user_10` is not it.
  const keys = [...names.keys()].sort((a, b) => b.length - a.length).map((k) => k.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return text.replace(new RegExp(keys.join("|"), "g"), (key) => names.get(key)!);
}

function idsOf(ids: z.infer<typeof UserIdSchema> | undefined): Record<string, unknown> {
  return ids ? { open_id: ids.open_id ?? null, union_id: ids.union_id ?? null, user_id: ids.user_id ?? null } : {};
}

/** Text and files of a message's `content` (a JSON string whose shape depends on message_type). */
export function contentOf(messageType: string, raw: string, mentions: Mention[] = [], ownKeys: ReadonlySet<string> = new Set()): { text: string | null; files: PlatformFile[] } {
  // Its content is a fixed line, not always JSON ("Merged and Forwarded Message"): its messages are read apart.
  if (messageType === "merge_forward") return { text: FORWARD_UNREAD, files: [] };
  const parsed = parseNested(raw);
  if (parsed === undefined) return { text: null, files: [] };
  // Content that is JSON but no object (`null`, a number) says nothing of any type's fields.
  const c = asRecord(parsed);
  const str = (v: unknown) => (typeof v === "string" && v ? v : null);
  switch (messageType) {
    case "text":
      return { text: str(c.text), files: [] };
    case "image":
      return { text: null, files: str(c.image_key) ? [{ ref: `image:${c.image_key}`, artifactType: "image" }] : [] };
    case "file":
      return { text: null, files: str(c.file_key) ? [{ ref: `file:${c.file_key}`, name: str(c.file_name), artifactType: "file" }] : [] };
    case "audio":
      return { text: null, files: str(c.file_key) ? [{ ref: `file:${c.file_key}`, artifactType: "audio", mimeType: "audio/opus" }] : [] };
    case "media":
      return { text: null, files: str(c.file_key) ? [{ ref: `file:${c.file_key}`, name: str(c.file_name), artifactType: "video" }] : [] };
    case "post":
      return postContent(c, mentions, ownKeys);
    default:
      return { text: nonTextOf(messageType, c), files: [] };
  }
}

/**
 * Rich text: `{title, content: [[{tag, text | href | image_key}]]}`, possibly wrapped in a locale key. `ownKeys`: the
 * bot's own mentions, left out where they are among those the post begins with, as in a text message
 * (withoutOwnLeadingMentions).
 */
function postContent(c: Record<string, unknown>, mentions: Mention[], ownKeys: ReadonlySet<string>): { text: string | null; files: PlatformFile[] } {
  const post = Array.isArray(c.content) ? c : (Object.values(c).find((v) => v && typeof v === "object" && Array.isArray((v as Record<string, unknown>).content)) as Record<string, unknown> | undefined);
  if (!post) return { text: null, files: [] };
  const lines: string[] = [];
  const files: PlatformFile[] = [];
  const title = typeof post.title === "string" ? post.title : "";
  if (title) lines.push(title);
  // Among the first paragraph's leading mentions (and the separators between them); whether one of the bot's own was
  // left out (with the separators after it); whether anything but those mentions has words.
  let leading = ownKeys.size > 0;
  let addressed = false;
  let trim = false;
  let said = title !== "";
  for (const paragraph of post.content as unknown[]) {
    if (!Array.isArray(paragraph)) continue;
    let line = "";
    for (const el of (paragraph as unknown[]).map(asRecord)) {
      if (leading && el.tag === "at" && typeof el.user_id === "string" && ownKeys.has(el.user_id)) {
        addressed = trim = true;
        continue;
      }
      let piece = pieceOf(el, mentions);
      if (trim && piece) {
        piece = piece.replace(/^[\s,:]*/, "");
        trim = piece === "";
      }
      if (leading && el.tag !== "at" && /[^\s,:]/.test(piece)) leading = false;
      if (!leading && piece.trim()) said = true;
      line += piece;
      if (el.tag === "img" && typeof el.image_key === "string") files.push({ ref: `image:${el.image_key}`, artifactType: "image" });
      // A video in rich text is fetched as a standalone video message is (the message's resource, type=file).
      if (el.tag === "media" && typeof el.file_key === "string") files.push({ ref: `file:${el.file_key}`, name: typeof el.file_name === "string" ? el.file_name : null, artifactType: "video" });
    }
    leading = trim = false;
    lines.push(line);
  }
  // Addressed to the bot with nothing else said: read as sent, so a bare ping still says the bot was called.
  if (addressed && !said) return postContent(c, mentions, new Set());
  const text = lines.join("\n").trim();
  return { text: text || null, files };
}

/** What a rich-text element says: its text, a link with its target after its label, a fenced code block, a mention. */
function pieceOf(el: Record<string, unknown>, mentions: Mention[]): string {
  if ((el.tag === "text" || el.tag === "md") && typeof el.text === "string") return el.text;
  // A link's target follows its label (a runner has only the text); a code block stays one, fenced.
  if (el.tag === "a" && typeof el.text === "string") return typeof el.href === "string" && el.href && el.href !== el.text ? `${el.text} (${el.href})` : el.text;
  if (el.tag === "code_block" && typeof el.text === "string") return `\`\`\`${typeof el.language === "string" ? el.language.toLowerCase() : ""}\n${el.text.replace(/\n$/, "")}\n\`\`\``;
  // A received post's `at` names its placeholder (`@_user_1`) and may leave user_name empty (Lark's own example
  // does): the name is then the mentions list's; one nobody named keeps its placeholder, as in a text message.
  if (el.tag === "at") return mentionOf(el, mentions);
  return "";
}

/** A rich-text `at` element as the runner reads it: `@name`, from the element or from the message's mentions. */
function mentionOf(el: Record<string, unknown>, mentions: Mention[]): string {
  const id = typeof el.user_id === "string" ? el.user_id : "";
  const name = (typeof el.user_name === "string" && el.user_name) || mentions.find((m) => m.key === id)?.name;
  if (name) return `@${name}`;
  return id.startsWith("@") ? id : "";
}
