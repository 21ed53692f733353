/**
 * A Lark merged forward (`merge_forward`: a stretch of a conversation forwarded as one message, often to be
 * summarised) as its runner reads it. The event carries none of its messages: they are read from the API
 * (./get-message.ts) before the event is recorded, within what is left of Lark's 3 s for the webhook's answer, and
 * written out as a transcript, one `name: words` line each in the order they were sent, a forward inside it indented
 * under its own line. Bounded: FORWARD_MAX_MESSAGES lines and about FORWARD_MAX_CHARS characters (one message's words
 * cut at MESSAGE_MAX_CHARS), a last line counting what is left out. Their files are named, not fetched: Lark serves no
 * file of a forwarded message. A forward that cannot be read in time still runs, its text saying why.
 */
import { headOf } from "../../lib/text";
import { loggedText } from "../../lib/log-text";
import { asRecord } from "../http";
import { scrubSecrets } from "../redact";
import type { RecordedReply } from "../reply-context";
import { RECALLED } from "../unaddressed-read";
import type { Bot, NormalizedEvent, PlatformFile } from "../types";
import type { LarkCredentials } from "./api";
import { cardText } from "./card-text";
import { getLarkMessage, type LarkMessage } from "./get-message";
import { contentOf, withMentionNames } from "./normalize";
import { larkUserNames } from "./user-names";

export const FORWARD_MAX_MESSAGES = 100;
export const FORWARD_MAX_CHARS = 20_000;
const MESSAGE_MAX_CHARS = 2_000;
/** Forwards inside forwards deeper than this show their own line only. */
const MAX_DEPTH = 3;

interface Entry {
  item: LarkMessage;
  depth: number;
}

/** How a forward's text opens once read, whatever it holds (an agent's prefix matching it would have it answered). */
export const FORWARD_OPENING = "Forwarded messages (";

/** A forward whose messages were not read, saying why. */
export const forwardNotRead = (event: NormalizedEvent, why: string): NormalizedEvent => ({ ...event, unread: false, text: `[Forwarded messages, not read: ${why}]`, data: { ...event.data, forwarded: { total: null, messages: [], unavailable: why } } });

/**
 * Whether a message was recorded as a forward whose messages were not read: left unread, not read in time, refused,
 * or a paused bot's (no `forwarded` at all). A read one counts them (`total`).
 */
export const forwardLeftUnread = (recorded: RecordedReply): boolean => recorded.data.message_type === "merge_forward" && typeof asRecord(recorded.data.forwarded).total !== "number";

export async function withForwardedMessages(bot: Bot<LarkCredentials>, event: NormalizedEvent, timeoutMs: number): Promise<NormalizedEvent> {
  const messageId = event.data.message_id;
  const unread = (why: string) => forwardNotRead(event, why);
  if (typeof messageId !== "string") return unread("the event names no message");
  const late = "not read within Lark's acknowledgement deadline";
  if (timeoutMs <= 0) return unread(late);
  const until = Date.now() + timeoutMs;
  const got = await getLarkMessage(bot, messageId, timeoutMs);
  if (!got.ok) {
    const why = got.failure.code === "timeout" ? late : scrubSecrets(`Lark answered: ${got.failure.message}`, bot.credentials);
    console.warn(`lark bot ${bot.botId}: the forwarded messages of ${loggedText(messageId)} were not read (${loggedText(why)})`);
    return unread(why);
  }
  // Recalled, its messages went with it (its recall event may be late, or missed): said as a replied one is.
  if (got.value[0].deleted) return unread(RECALLED);
  const read = await forwardTranscript(bot, got.value, until - Date.now());
  return { ...event, unread: false, text: read.text, data: { ...event.data, forwarded: read.forwarded } };
}

/**
 * A forward as getLarkMessage gives it (the forward itself first, then the messages in it) as its transcript, and what
 * `event.data.forwarded` keeps of it; `timeoutMs` bounds the names' lookup.
 */
export async function forwardTranscript(bot: Bot<LarkCredentials>, [forward, ...rest]: LarkMessage[], timeoutMs: number): Promise<{ text: string; forwarded: Record<string, unknown> }> {
  const within = rest.filter((item) => item.message_id !== forward.message_id);
  const entries = inOrder(forward.message_id, within);
  const shown = entries.slice(0, FORWARD_MAX_MESSAGES);
  const label = await labeller(bot, shown, timeoutMs);
  const lines: string[] = [];
  const messages: Record<string, unknown>[] = [];
  let chars = 0;
  for (const { item, depth } of shown) {
    const indent = "  ".repeat(depth);
    const words = wordsOf(item);
    const line = `${indent}${label(item)}: ${words.replace(/\n/g, `\n${indent}  `)}`;
    if (lines.length > 0 && chars + line.length > FORWARD_MAX_CHARS) break;
    chars += line.length + 1;
    lines.push(line);
    messages.push({ message_id: item.message_id, upper_message_id: item.upper_message_id ?? null, msg_type: item.msg_type, create_time: item.create_time ?? null, sender: item.sender ?? null, sender_label: label(item), text: words });
  }
  const left = within.length - lines.length;
  const text = [`${FORWARD_OPENING}${within.length}):`, ...lines, ...(left > 0 ? [`… ${left} more not shown`] : [])].join("\n");
  return { text, forwarded: { total: within.length, messages, unavailable: null } };
}

/** The forward's messages depth first, each forward's own in the order they were sent (Lark's order where times tie). */
function inOrder(rootId: string, items: LarkMessage[]): Entry[] {
  const held = new Map<string, LarkMessage[]>();
  for (const item of items) {
    const upper = item.upper_message_id ?? rootId;
    held.set(upper, [...(held.get(upper) ?? []), item]);
  }
  const out: Entry[] = [];
  const seen = new Set<string>([rootId]);
  const walk = (id: string, depth: number) => {
    const sorted = [...(held.get(id) ?? [])].sort((a, b) => Number(a.create_time ?? 0) - Number(b.create_time ?? 0));
    for (const item of sorted) {
      if (seen.has(item.message_id)) continue;
      seen.add(item.message_id);
      out.push({ item, depth });
      if (depth + 1 <= MAX_DEPTH) walk(item.message_id, depth + 1);
    }
  };
  walk(rootId, 0);
  return out;
}

/** What one message says, as a line of the transcript reads it. */
function wordsOf(item: LarkMessage): string {
  if (item.deleted) return "[deleted]";
  if (item.msg_type === "merge_forward") return "[forwarded messages]";
  const mentions = item.mentions ?? [];
  // A card (the bot's own answers among them) reads as its words, where Lark gives them (./card-text.ts).
  const { text, files } = item.msg_type === "interactive" ? { text: cardText(item.body?.content ?? ""), files: [] } : contentOf(item.msg_type, item.body?.content ?? "", mentions);
  const words = item.msg_type === "text" ? withMentionNames(text, mentions) : text;
  const said = [words, ...files.map(fileMark)].filter(Boolean).join(" ") || `[${item.msg_type}]`;
  return said.length > MESSAGE_MAX_CHARS ? `${headOf(said, MESSAGE_MAX_CHARS)}…` : said;
}

const fileMark = (f: PlatformFile) => `[${f.artifactType}${f.name ? `: ${f.name}` : ""}]`;

/**
 * Who sent each message: a user by name where Lark gives it (a mention in the forward names them too, else the
 * contact API), else `User 1`, `User 2`... in the order they first speak; the bot itself and other apps as such.
 */
async function labeller(bot: Bot<LarkCredentials>, entries: Entry[], timeoutMs: number): Promise<(item: LarkMessage) => string> {
  const named = new Map<string, string>();
  for (const { item } of entries) for (const m of item.mentions ?? []) if (m.id && m.name) named.set(m.id, m.name);
  const users = entries.flatMap(({ item }) => (item.sender?.sender_type !== "app" && item.sender?.id && !named.has(item.sender.id) ? [item.sender.id] : []));
  for (const [id, name] of users.length ? await larkUserNames(bot, users, timeoutMs) : []) named.set(id, name);
  const numbered = new Map<string, string>();
  return (item) => {
    const id = item.sender?.id;
    if (item.sender?.sender_type === "app") return id === bot.credentials.app_id ? "This bot" : "An app";
    if (!id) return "Someone";
    const name = named.get(id) ?? numbered.get(id) ?? `User ${numbered.size + 1}`;
    if (!named.has(id)) numbered.set(id, name);
    return name;
  };
}
