/**
 * A Lark/Feishu card callback (`card.action.trigger`, schema 2.0) in the host's terms: a press on a card's button, a
 * select, an input or a form becomes a `message.received`, as a Discord component press does. Its input is what was
 * chosen, its actor the operator, its reply a reply to the card's message. The callback's `event.token` (it updates the
 * card) is neither read nor kept (index.ts redactRaw).
 */
import * as z from "zod";
import type { NormalizedEvent } from "../types";
import { unhandledEvent as unhandled } from "../unhandled";
import { platformTime } from "../../lib/json";
import { absentOr } from "../payload";

export const CARD_ACTION = "card.action.trigger";

const CardActionSchema = z.looseObject({
  operator: absentOr(z.looseObject({ open_id: absentOr(z.string()), union_id: absentOr(z.string()), user_id: absentOr(z.string()) })),
  action: z.looseObject({
    tag: absentOr(z.string()),
    name: absentOr(z.string()),
    // The developer's callback data bound to the element: a string or an object.
    value: absentOr(z.union([z.string(), z.record(z.string(), z.unknown())])),
    option: absentOr(z.string()),
    options: absentOr(z.array(z.string())),
    input_value: absentOr(z.string()),
    form_value: absentOr(z.record(z.string(), z.unknown())),
    checked: absentOr(z.boolean()),
  }),
  host: absentOr(z.string()),
  context: absentOr(z.looseObject({ open_message_id: absentOr(z.string()), open_chat_id: absentOr(z.string()) })),
});

/** A form's fields as typed or picked, one a line (a multi-select's options on one); a checker's true/false is left to the data. */
function formText(form: Record<string, unknown> | undefined): string {
  const shown = Object.values(form ?? {}).map((v) => (typeof v === "string" ? v : Array.isArray(v) ? v.filter((x) => typeof x === "string").join(" ") : ""));
  return shown.filter(Boolean).join("\n");
}

/** The element's own callback data as text: a string as it is, an object as compact JSON (an empty one says nothing). */
function valueText(value: string | Record<string, unknown> | undefined): string {
  if (value === undefined || typeof value === "string") return value ?? "";
  return Object.keys(value).length ? JSON.stringify(value) : "";
}

/**
 * Card callbacks give `create_time` in microseconds (Lark's samples: 16 digits), not the milliseconds of events. Read
 * by its size, so a callback stamped in milliseconds is never taken for 1970 (and rejected as older than every message).
 */
const MICROSECONDS_FROM = 1e14;
const callbackTime = (createTime: string | undefined) => {
  if (!createTime || !/^\d+$/.test(createTime)) return undefined;
  const n = Number(createTime);
  return platformTime(n >= MICROSECONDS_FROM ? n / 1000 : n);
};

export function normalizeCardAction(key: string, event: unknown, header: { create_time?: string; tenant_key?: unknown }): NormalizedEvent {
  const eventTime = callbackTime(header.create_time);
  const c = CardActionSchema.safeParse(event);
  if (!c.success) return unhandled(key, CARD_ACTION, eventTime);
  const { operator, action, context } = c.data;
  const chatId = context?.open_chat_id;
  const messageId = context?.open_message_id;
  // A card outside a chat (a link preview not yet sent) has no one to answer.
  if (!chatId || !operator?.open_id) return { ...unhandled(key, CARD_ACTION, eventTime), conversationId: chatId || null };
  const values = [action.input_value, action.option, ...(action.options ?? [])].filter((v): v is string => v !== undefined);
  // What was typed or picked; a form's fields; a button's own value; else the element's name or tag.
  const text = values.filter(Boolean).join(" ") || formText(action.form_value) || valueText(action.value) || action.name || action.tag || "";
  const component = {
    custom_id: action.name ?? null,
    component_type: action.tag ?? null,
    values,
    value: action.value ?? null,
    ...(action.form_value ? { form_value: action.form_value } : {}),
    ...(action.checked !== undefined ? { checked: action.checked } : {}),
  };
  return {
    key,
    eventType: "message.received",
    sourceEventType: CARD_ACTION,
    eventTime,
    conversationId: chatId,
    // The callback names no topic thread (nor does its `context`): the press is the chat's, and a reply to the card's
    // message lands where Lark puts it (in a topic-mode chat, the card's topic: its reply API says so).
    threadId: null,
    actor: { actor_type: "user", actor_id: operator.open_id, actor_name: null, metadata: { open_id: operator.open_id, union_id: operator.union_id ?? null, user_id: operator.user_id ?? null } },
    text,
    files: [],
    // `open_message_id`, not `message_id`: that names a person's own message, which a recall or an edit revises.
    data: { lark_event_id: key, tenant_key: header.tenant_key ?? null, component, open_message_id: messageId ?? null, host: c.data.host ?? null },
    replyTarget: { platform: "lark", chatId, replyToMessageId: messageId ?? null, replyInThread: false },
  };
}
