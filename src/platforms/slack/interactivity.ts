/**
 * Slack's interactivity requests (button presses, select menus, modals, shortcuts) and slash commands in the host's
 * terms. Slack posts them form-encoded, signed as events are: a press's or shortcut's JSON in one `payload` field, a
 * slash command as fields of its own. A `block_actions` press on a message becomes a `message.received`, as a Discord
 * component press does: its input is what was chosen, its reply goes to the message's channel and thread (to the
 * presser alone for a press on an ephemeral message: platforms/audience.ts, ./ephemeral.ts). A slash
 * command and a message shortcut run as Discord's commands do (./commands.ts). Other payloads are recorded, never refused.
 */
import * as z from "zod";
import type { Inbound, NormalizedEvent } from "../types";
import { unhandledEvent as unhandled } from "../unhandled";
import { parseBody } from "../verify";
import { absentOr, withoutNulls } from "../payload";
import { messageShortcutOf, slashCommandOf } from "./commands";
import { asRecord } from "../http";
import { namedByCommand, namedByPayload, type NamedInstallation } from "./installation";

const OptionSchema = z.looseObject({ value: absentOr(z.string()), text: absentOr(z.looseObject({ text: absentOr(z.string()) })) });

/** One pressed element: a button's `value`, a select's or checkbox group's option(s), a picker's pick, a typed `value`. */
const ActionSchema = z.looseObject({
  type: z.string(),
  action_id: absentOr(z.string()),
  block_id: absentOr(z.string()),
  value: absentOr(z.string()),
  text: absentOr(z.looseObject({ text: absentOr(z.string()) })),
  selected_option: absentOr(OptionSchema),
  selected_options: absentOr(z.array(OptionSchema)),
  selected_user: absentOr(z.string()),
  selected_users: absentOr(z.array(z.string())),
  selected_conversation: absentOr(z.string()),
  selected_conversations: absentOr(z.array(z.string())),
  selected_channel: absentOr(z.string()),
  selected_channels: absentOr(z.array(z.string())),
  selected_date: absentOr(z.string()),
  selected_time: absentOr(z.string()),
  selected_date_time: absentOr(z.number()),
});
type Action = z.infer<typeof ActionSchema>;

const BlockActionsSchema = z.looseObject({
  trigger_id: absentOr(z.string()),
  user: absentOr(z.looseObject({ id: z.string(), username: absentOr(z.string()), team_id: absentOr(z.string()) })),
  team: absentOr(z.looseObject({ id: absentOr(z.string()) })),
  // A message's press names its message; one in a modal or the App Home names a view, and no chat.
  // `is_ephemeral`: the message is one only the presser sees.
  container: absentOr(
    z.looseObject({ type: absentOr(z.string()), channel_id: absentOr(z.string()), message_ts: absentOr(z.string()), thread_ts: absentOr(z.string()), is_ephemeral: absentOr(z.boolean()) }),
  ),
  channel: absentOr(z.looseObject({ id: z.string() })),
  message: absentOr(z.looseObject({ ts: absentOr(z.string()), thread_ts: absentOr(z.string()) })),
  actions: z.array(ActionSchema).min(1),
  response_url: absentOr(z.string()),
});

/**
 * Whether a signed request is an interactivity one: Slack form-encodes those, and sends events as JSON. The signature
 * covers the body, not its content type: an event sent again typed as a form would be read as the fields its text
 * quotes (a link's query: `&team_id=...&command=...`), so a body that is a JSON object is an event however typed.
 */
export const isInteractivity = (headers: Headers, rawBody: string) =>
  (headers.get("content-type") ?? "").toLowerCase().startsWith("application/x-www-form-urlencoded") && !rawBody.trimStart().startsWith("{");

/** A signed form body as Slack sent it: a slash command's own fields, or an interactivity payload's JSON as parsed. */
export type SlackForm = { kind: "fields"; fields: Record<string, string> } | { kind: "payload"; body: unknown };

export function parseForm(rawBody: string): SlackForm {
  const form = new URLSearchParams(rawBody);
  const payload = form.get("payload");
  return payload === null ? { kind: "fields", fields: Object.fromEntries(form) } : { kind: "payload", body: parseBody(payload) };
}

/** The Slack installation the form names (./installation.ts). */
export const namedByForm = (form: SlackForm): NamedInstallation => (form.kind === "fields" ? namedByCommand(form.fields) : namedByPayload(asRecord(form.body)));

/**
 * A signed form body read: `fallbackKey` names a payload without a trigger_id (a body digest). Sent once: Slack retries
 * Events API deliveries, never these (the user sees the timeout instead).
 */
export function readInteractivity(form: SlackForm, fallbackKey: string): Inbound {
  if (form.kind === "fields") {
    // A slash command; anything else form-encoded is recorded, not run.
    const { fields } = form;
    const key = fields.trigger_id ? `interaction:${fields.trigger_id}` : fallbackKey;
    const event = fields.command ? slashCommandOf(fields, key) : { ...unhandled(key, "unknown"), conversationId: fields.channel_id || null };
    return { kind: "events", raw: fields, events: [event], sentOnce: true };
  }
  const { body } = form;
  const given = body && typeof body === "object" ? (withoutNulls(body) as Record<string, unknown>) : {};
  const type = typeof given.type === "string" ? given.type : "unknown";
  // An external select asking for its options as the user types: none offered, and nothing recorded per keystroke.
  if (type === "block_suggestion") return { kind: "handshake", body: { options: [] } };
  const key = typeof given.trigger_id === "string" ? `interaction:${given.trigger_id}` : fallbackKey;
  // The payload as parsed, not as the schema rebuilt it: the stored copy keeps Slack's own key order.
  if (type === "message_action") return { kind: "events", raw: body, events: [messageShortcutOf(given, key)], sentOnce: true };
  if (type !== "block_actions") return { kind: "events", raw: body, events: [{ ...unhandled(key, type), conversationId: channelIn(given) }], sentOnce: true };
  return { kind: "events", raw: body, events: [pressOf(given, key)], sentOnce: true };
}

function channelIn(given: Record<string, unknown>): string | null {
  const channel = given.channel as { id?: unknown } | undefined;
  return typeof channel?.id === "string" ? channel.id : null;
}

/** The values an element's press chose: a button's value, the options picked, a user (`@U1`) or channel (`#C1`) as Slack's text reads them. */
function chosen(a: Action): { values: string[]; shown: string[] } {
  const options = a.selected_options ?? (a.selected_option ? [a.selected_option] : []);
  if (options.length) {
    const values = options.map((o) => o.value ?? o.text?.text ?? "");
    return { values, shown: values };
  }
  const users = a.selected_users ?? (a.selected_user ? [a.selected_user] : []);
  if (users.length) return { values: users, shown: users.map((u) => `@${u}`) };
  const channels = a.selected_conversations ?? a.selected_channels ?? [a.selected_conversation ?? a.selected_channel].filter((c): c is string => c !== undefined);
  if (channels.length) return { values: channels, shown: channels.map((c) => `#${c}`) };
  const picked = [a.selected_date, a.selected_time, a.selected_date_time === undefined ? undefined : String(a.selected_date_time), a.value].filter((v): v is string => v !== undefined);
  return { values: picked, shown: picked };
}

function pressOf(given: Record<string, unknown>, key: string): NormalizedEvent {
  const p = BlockActionsSchema.safeParse(given);
  if (!p.success) return unhandled(key, "block_actions");
  const { container, message, user } = p.data;
  const channel = container?.channel_id ?? p.data.channel?.id;
  // Pressed in a modal or the App Home: no chat to answer in.
  if (!channel || container?.type === "view") return { ...unhandled(key, "block_actions.view"), conversationId: null };
  // A press on a message only its user sees is answered to that user alone, so it must name them (Slack always does).
  const ephemeral = container?.is_ephemeral === true;
  if (ephemeral && !user) return { ...unhandled(key, "block_actions"), conversationId: channel };
  const ts = container?.message_ts ?? message?.ts;
  const thread = container?.thread_ts ?? message?.thread_ts;
  // A thread's parent is at top level: pressed there, the answer is too, as for a message.
  const threadId = thread !== undefined && thread !== ts ? thread : null;
  const [action] = p.data.actions;
  const { values, shown } = chosen(action);
  // What was chosen; a button without a value (or a select emptied), its label, else its action_id.
  const text = shown.filter(Boolean).join(" ") || action.text?.text || action.action_id || "";
  const team = user?.team_id ?? p.data.team?.id;
  return {
    key,
    eventType: "message.received",
    sourceEventType: "block_actions",
    conversationId: channel,
    threadId,
    actor: user ? { actor_type: "user", actor_id: user.id, actor_name: null, metadata: { ...(team ? { team } : {}), ...(user.username ? { username: user.username } : {}) } } : null,
    text,
    files: [],
    // Named as a Discord press's component is; not `ts`, which names a message of the person's own (recalls, edits).
    data: { team_id: team ?? null, component: { custom_id: action.action_id ?? null, component_type: action.type, block_id: action.block_id ?? null, values }, message_ts: ts ?? null },
    replyTarget: { platform: "slack", channel, threadTs: threadId, ...(p.data.response_url ? { responseUrl: p.data.response_url } : {}), ...(ephemeral && user ? { ephemeral, userId: user.id } : {}) },
  };
}
