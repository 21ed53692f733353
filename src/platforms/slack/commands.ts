/**
 * Slack's slash commands and message shortcuts in the host's terms, run as Discord's commands are. A slash command
 * comes form-encoded on its own (`command`, `text`, `user_id`, `channel_id`, `response_url`, ...) to the command's
 * Request URL; a message shortcut (`message_action`) as an interactivity payload naming the message it was used on.
 * Each carries a `response_url`, kept in the reply target only (./response-url.ts).
 */
import * as z from "zod";
import { absentOr } from "../payload";
import type { DeliveryTarget, NormalizedEvent } from "../types";
import { unhandledEvent as unhandled } from "../unhandled";
import { readableSlackText } from "./inbound-text";
import { FileSchema, filesOf } from "./normalize";

const SlashCommandSchema = z.looseObject({
  command: z.string().regex(/^\/\S+$/),
  text: absentOr(z.string()),
  user_id: z.string().min(1),
  user_name: absentOr(z.string()),
  channel_id: z.string().min(1),
  channel_name: absentOr(z.string()),
  team_id: absentOr(z.string()),
  response_url: absentOr(z.string()),
});

const MessageShortcutSchema = z.looseObject({
  callback_id: z.string(),
  user: z.looseObject({ id: z.string(), username: absentOr(z.string()), team_id: absentOr(z.string()) }),
  team: absentOr(z.looseObject({ id: absentOr(z.string()) })),
  channel: z.looseObject({ id: z.string() }),
  message: z.looseObject({ ts: z.string(), thread_ts: absentOr(z.string()), text: absentOr(z.string()), user: absentOr(z.string()), files: absentOr(z.array(FileSchema)) }),
  response_url: absentOr(z.string()),
});

const actorOf = (id: string, team: string | undefined, username: string | undefined) => ({
  actor_type: "user",
  actor_id: id,
  actor_name: null,
  metadata: { ...(team ? { team } : {}), ...(username ? { username } : {}) },
});

const targetOf = (channel: string, threadTs: string | null, responseUrl: string | undefined): DeliveryTarget => ({ platform: "slack", channel, threadTs, ...(responseUrl ? { responseUrl } : {}) });

/** A slash command, as its form's fields: `/ask what is X` reads `what is X`, as a Discord command reads its values; `/ask` alone reads `/ask`. */
export function slashCommandOf(fields: Record<string, string>, key: string): NormalizedEvent {
  const p = SlashCommandSchema.safeParse(fields);
  if (!p.success) return { ...unhandled(key, "slash_command"), conversationId: fields.channel_id || null };
  const c = p.data;
  const raw = c.text ?? "";
  const words = readableSlackText(raw, []).trim();
  return {
    key,
    eventType: "message.received",
    sourceEventType: "slash_command",
    conversationId: c.channel_id,
    // Slack runs an app's commands outside threads only: the answer goes to the channel.
    threadId: null,
    actor: actorOf(c.user_id, c.team_id, c.user_name),
    text: words || c.command,
    files: [],
    // Named without its slash, as a Discord command is; the text as Slack sent it, markup and all.
    data: { team_id: c.team_id ?? null, channel_name: c.channel_name ?? null, command: { name: c.command.slice(1) }, raw_text: raw },
    replyTarget: targetOf(c.channel_id, null, c.response_url),
  };
}

/**
 * A message shortcut: the message it was used on is what the user means, as with a Discord message command (its words
 * and files; the shortcut's `callback_id` when it has no words). Answered in the message's thread, or at top level for
 * a top-level message (a thread's parent too), as a press on it would be.
 */
export function messageShortcutOf(given: Record<string, unknown>, key: string): NormalizedEvent {
  const p = MessageShortcutSchema.safeParse(given);
  if (!p.success) {
    const channel = (given.channel as { id?: unknown } | undefined)?.id;
    return { ...unhandled(key, "message_action"), conversationId: typeof channel === "string" ? channel : null };
  }
  const { user, channel, message, callback_id: name } = p.data;
  const threadId = message.thread_ts !== undefined && message.thread_ts !== message.ts ? message.thread_ts : null;
  const team = user.team_id ?? p.data.team?.id;
  const words = message.text ? readableSlackText(message.text, []).trim() : "";
  const target = { type: "message", id: message.ts, content: message.text ?? null, author_id: message.user ?? null };
  return {
    key,
    eventType: "message.received",
    sourceEventType: "message_action",
    conversationId: channel.id,
    threadId,
    actor: actorOf(user.id, team, user.username),
    text: words || name,
    files: filesOf(message.files),
    // Not `ts`, which names a message of the person's own (the chat's order); its recall or edit reaches this copy by
    // its EventLog message_ref (../message-ref.ts).
    data: { team_id: team ?? null, command: { name, target }, message_ts: message.ts },
    replyTarget: targetOf(channel.id, threadId, p.data.response_url),
  };
}
