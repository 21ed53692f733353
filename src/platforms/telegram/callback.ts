/**
 * A Telegram `callback_query` (a press on an inline keyboard's callback button) in the host's terms: a
 * `message.received`, as a Discord component, a Slack `block_actions` or a Lark card press is. Its input is the
 * button's `callback_data`, its actor the person who pressed, its conversation the chat (and forum topic) of the message
 * the button is on, and its answer a reply to that message. The webhook's answer closes the press (answerCallbackQuery,
 * ./index.ts): until then Telegram shows a progress bar on the button.
 */
import * as z from "zod";
import type { NormalizedEvent, Recorded } from "../types";
import { unhandledEvent as unhandled } from "../unhandled";
import { pressNotice } from "../press-notice";
import { actorOf, UserSchema } from "./actor";

export const CALLBACK_QUERY = "callback_query";

const ButtonSchema = z.looseObject({ text: z.string(), callback_data: z.string().optional() });

const CallbackQuerySchema = z.looseObject({
  id: z.string().min(1),
  from: UserSchema,
  /**
   * The bot's message the button is on; absent for a message sent via the bot in inline mode (`inline_message_id`). One
   * Telegram no longer gives (too old, deleted: an InaccessibleMessage) has `date` 0 and only its chat and id.
   */
  message: z
    .looseObject({
      message_id: z.number(),
      date: z.number().optional(),
      chat: z.looseObject({ id: z.number(), type: z.string(), title: z.string().optional() }),
      message_thread_id: z.number().optional(),
      is_topic_message: z.boolean().optional(),
      reply_markup: z.looseObject({ inline_keyboard: z.array(z.array(z.unknown())) }).optional(),
    })
    .optional(),
  /** Absent for a game's button (`game_short_name`). */
  data: z.string().optional(),
});

/** The label of the button whose callback_data was pressed, as the keyboard still shows it, or null. */
function labelOf(keyboard: unknown[][] | undefined, data: string): string | null {
  for (const button of (keyboard ?? []).flat()) {
    const b = ButtonSchema.safeParse(button);
    if (b.success && b.data.callback_data === data) return b.data.text;
  }
  return null;
}

export function normalizeCallbackQuery(updateId: number, payload: unknown): NormalizedEvent {
  const key = String(updateId);
  const q = CallbackQuerySchema.safeParse(payload);
  const m = q.data?.message;
  const topic = m?.is_topic_message && m.message_thread_id !== undefined ? m.message_thread_id : null;
  const where = { conversationId: m ? String(m.chat.id) : null, threadId: topic === null ? null : String(topic) };
  // The press's own id, which the webhook's answer names to close it (callbackAnswer).
  const pressed = q.success ? { callback_query_id: q.data.id } : {};
  // No chat to answer in (an inline-mode message), or no data to give (a game): recorded, and the press closed.
  if (!q.success || !m || q.data.data === undefined) return { ...unhandled(key, CALLBACK_QUERY), ...where, data: pressed };
  const data = q.data.data;
  return {
    key,
    eventType: "message.received",
    sourceEventType: CALLBACK_QUERY,
    ...where,
    actor: actorOf(q.data.from),
    text: data,
    files: [],
    // Named as the other platforms' presses are. The pressed message is `callback_message_id`, never `message_id`:
    // that names a person's own message, which an edit revises and which orders a chat's messages.
    data: {
      update_id: updateId,
      ...pressed,
      chat_type: m.chat.type,
      chat_title: m.chat.title ?? null,
      callback_message_id: m.message_id,
      component: { custom_id: data, component_type: "callback_button", label: labelOf(m.reply_markup?.inline_keyboard, data), values: [] },
    },
    // A message Telegram no longer gives names no topic: the press is the chat's own (a forum's General), and its
    // answer quotes nothing, as a reply to it would go to that message's topic, not where the press is recorded.
    replyTarget: { platform: "telegram", chatId: String(m.chat.id), messageThreadId: topic, replyToMessageId: m.date === 0 ? null : m.message_id },
  };
}

/**
 * The webhook's answer to a press: Telegram runs a Bot API method named in it (`answerCallbackQuery`), which ends the
 * button's progress bar, with a notice when the press starts no answer ("No agent answers here.", ...). Null for any
 * other update.
 */
export function callbackAnswer(r: Recorded | undefined): Record<string, unknown> | null {
  const id = r?.event.sourceEventType === CALLBACK_QUERY ? r.event.data.callback_query_id : undefined;
  if (typeof id !== "string") return null;
  const said = pressNotice(r);
  return { method: "answerCallbackQuery", callback_query_id: id, ...(said === null ? {} : { text: said }) };
}
