/**
 * Discord interactions (slash commands, context-menu commands, message
 * components, modal submits) in the host's terms. Ordinary channel messages
 * reach bots only over the Gateway, which this host does not hold. Identity:
 * a channel is a conversation (`channel_id`); a thread channel is a thread of
 * its parent channel. The guild is kept in `data.guild_id`.
 */
import * as z from "zod";
import { nullAsAbsent } from "../payload";
import type { NormalizedEvent, PlatformFile } from "../types";
import { followupLimitOf } from "./followup-limit";
import { memberName, nameOf, optionKind, ResolvedNamesShape, selectKind, UserSchema, userName } from "./names";
import { AttachmentSchema, fileOf, TargetMessageSchema, targetMessageInput } from "./target-message";

export const InteractionType = { PING: 1, APPLICATION_COMMAND: 2, MESSAGE_COMPONENT: 3, AUTOCOMPLETE: 4, MODAL_SUBMIT: 5 } as const;
const TYPE_NAMES: Record<number, string> = { 1: "PING", 2: "APPLICATION_COMMAND", 3: "MESSAGE_COMPONENT", 4: "APPLICATION_COMMAND_AUTOCOMPLETE", 5: "MODAL_SUBMIT" };
/** Channel types that are threads (announcement, public, private). */
const THREAD_TYPES = new Set([10, 11, 12]);
const ATTACHMENT_OPTION = 11;
/** The message flag of an ephemeral message. */
const EPHEMERAL_FLAG = 64;
/** Application command types: a context-menu command names what it was used on (`target_id`). */
const USER_COMMAND = 2;
const MESSAGE_COMMAND = 3;

type CommandOption = { name: string; type: number; value?: unknown; options?: CommandOption[] };
const OptionSchema: z.ZodType<CommandOption> = z.lazy(() =>
  z.looseObject({ name: z.string(), type: z.number(), value: z.unknown().optional(), options: nullAsAbsent(z.array(OptionSchema)) }),
);

/**
 * A modal's submitted input: a text input's `value`, a select's or checkbox group's `values`, a file upload's (type 19)
 * attachment ids, a checkbox's (type 23) `value` true or false, a radio group's (type 21) `value`, null when none was picked.
 */
const ModalFieldSchema = z.looseObject({ type: nullAsAbsent(z.number()), custom_id: nullAsAbsent(z.string()), value: z.union([z.string(), z.boolean()]).nullish(), values: nullAsAbsent(z.array(z.string())) });
const FILE_UPLOAD = 19;

// A field sent as null reads as one left out (README), as on every platform: the interaction is never dropped for it.
export const InteractionSchema = z.looseObject({
  id: z.string().min(1),
  type: z.number().int(),
  token: nullAsAbsent(z.string()),
  guild_id: nullAsAbsent(z.string()),
  channel_id: nullAsAbsent(z.string()),
  channel: nullAsAbsent(z.looseObject({ id: z.string(), type: nullAsAbsent(z.number()), parent_id: z.string().nullish() })),
  member: nullAsAbsent(z.looseObject({ user: nullAsAbsent(UserSchema), nick: z.string().nullish() })),
  user: nullAsAbsent(UserSchema),
  // A component's (or a modal opened from one) message: `flags` 64 when only the user sees it (ephemeral).
  message: nullAsAbsent(z.looseObject({ id: z.string(), flags: nullAsAbsent(z.number().int()) })),
  // Which installs of the app the interaction is authorized by: "0" the server's (or its bot's DM), "1" the user's.
  authorizing_integration_owners: nullAsAbsent(z.record(z.string(), z.unknown())),
  data: nullAsAbsent(
    z.looseObject({
      name: nullAsAbsent(z.string()),
      type: nullAsAbsent(z.number()),
      target_id: z.string().nullish(),
      custom_id: nullAsAbsent(z.string()),
      component_type: nullAsAbsent(z.number()),
      values: nullAsAbsent(z.array(z.string())),
      options: nullAsAbsent(z.array(OptionSchema)),
      // A modal's inputs: in Action Rows (`components`), or each in a Label (type 18, its one `component`).
      components: nullAsAbsent(z.array(z.looseObject({ components: nullAsAbsent(z.array(ModalFieldSchema)), component: nullAsAbsent(ModalFieldSchema) }))),
      resolved: nullAsAbsent(
        z.looseObject({
          attachments: nullAsAbsent(z.record(z.string(), AttachmentSchema)),
          messages: nullAsAbsent(z.record(z.string(), TargetMessageSchema)),
          ...ResolvedNamesShape,
        }),
      ),
    }),
  ),
});
export type Interaction = z.infer<typeof InteractionSchema>;

export const interactionTypeName = (type: number) => TYPE_NAMES[type] ?? `INTERACTION_${type}`;

/** Subcommand names down to the leaf, and the leaf's options. */
function commandPath(options: CommandOption[] = []): { path: string[]; leaf: CommandOption[] } {
  const sub = options.find((o) => o.type === 1 || o.type === 2);
  if (!sub) return { path: [], leaf: options };
  const inner = commandPath(sub.options);
  return { path: [sub.name, ...inner.path], leaf: inner.leaf };
}

type CommandInput = { text: string; files: PlatformFile[]; command: Record<string, unknown> };

/**
 * A context-menu command: the message it was used on is what the user means
 * (its words are the input, a forward's and a bot's embeds included, its files
 * come along; the command's own name when it has no words: ./target-message.ts).
 * A user command reads as chosen, its name and the user it was used on
 * (`/Profile @Bobby`), as a slash command's picked user is named in its text;
 * both targets are named in the command's `target`.
 */
function contextMenuInput(i: Interaction, type: number): CommandInput {
  const name = i.data?.name ?? "";
  const targetId = i.data?.target_id ?? null;
  const resolved = i.data?.resolved;
  const base = { name, path: [], options: {} };
  if (type === MESSAGE_COMMAND) {
    const m = targetId ? resolved?.messages?.[targetId] : undefined;
    const read = m ? targetMessageInput(m) : { text: "", files: [], forwarded: false };
    const target = { type: "message", id: targetId, content: m?.content ?? null, author_id: m?.author?.id ?? null, author_name: m?.author ? userName(m.author) : null, ...(read.forwarded ? { forwarded: true } : {}) };
    return { text: read.text || `/${name}`, files: read.files, command: { ...base, target } };
  }
  const u = targetId ? resolved?.users?.[targetId] : undefined;
  const shown = u && targetId ? memberName(u, resolved?.members?.[targetId]?.nick) : null;
  return { text: targetId ? `/${name} ${nameOf("user", targetId, resolved)}` : `/${name}`, files: [], command: { ...base, target: { type: "user", id: targetId, name: shown } } };
}

function commandInput(i: Interaction): CommandInput {
  const type = i.data?.type;
  if (type === USER_COMMAND || type === MESSAGE_COMMAND) return contextMenuInput(i, type);
  const name = i.data?.name ?? "";
  const { path, leaf } = commandPath(i.data?.options);
  const resolved = i.data?.resolved;
  const attachments = resolved?.attachments ?? {};
  const files: PlatformFile[] = [];
  const values: string[] = [];
  const options: [string, unknown][] = [];
  for (const o of leaf) {
    options.push([o.name, o.value ?? null]);
    const kind = optionKind(o.type);
    if (o.type === ATTACHMENT_OPTION && typeof o.value === "string" && attachments[o.value]) {
      files.push(fileOf(attachments[o.value]));
    } else if (kind && typeof o.value === "string") {
      values.push(nameOf(kind, o.value, resolved));
    } else if (typeof o.value === "string" || typeof o.value === "number" || typeof o.value === "boolean") {
      values.push(String(o.value));
    }
  }
  // The user's words are the option values (`/ask question: hi` reads "hi"). A subcommand is a word of them too: read as
  // typed, `/todo add milk`, or `/todo add` and `/todo remove` would read the same; a command without values is its name.
  const line = `/${[name, ...path].join(" ")}`;
  const text = path.length ? [line, ...values].join(" ") : values.length ? values.join(" ") : line;
  // Defined, not assigned: an option named "__proto__" stays an option.
  return { text, files, command: { name, path, options: Object.fromEntries(options) } };
}

/** The fields that are set: an unset one is left out of the stored target, as it always was. */
const withoutUnset = <T extends Record<string, unknown>>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

export function normalizeInteraction(i: Interaction): NormalizedEvent[] {
  const sourceEventType = interactionTypeName(i.type);
  const channelId = i.channel?.id ?? i.channel_id ?? null;
  const inThread = i.channel?.type !== undefined && THREAD_TYPES.has(i.channel.type) && Boolean(i.channel.parent_id);
  const user = i.member?.user ?? i.user;
  const followupLimit = followupLimitOf(i.authorizing_integration_owners);
  // A press on a message only the user sees is answered for their eyes too.
  const ephemeral = ((i.message?.flags ?? 0) & EPHEMERAL_FLAG) !== 0;
  const target = { followupLimit, ephemeral: ephemeral || undefined, userId: user?.id };
  const common = {
    key: i.id,
    sourceEventType,
    conversationId: inThread ? i.channel!.parent_id! : channelId,
    threadId: inThread ? channelId : null,
    actor: user ? { actor_type: user.bot ? "bot" : "user", actor_id: user.id, actor_name: memberName(user, i.member?.nick), metadata: user.username ? { username: user.username } : {} } : null,
    replyTarget: i.token ? { platform: "discord" as const, channelId, interactionId: i.id, interactionToken: i.token, ...withoutUnset(target) } : null,
  };
  const data = { interaction_id: i.id, interaction_type: i.type, guild_id: i.guild_id ?? null, channel_id: channelId };

  if (i.type === InteractionType.APPLICATION_COMMAND) {
    const input = commandInput(i);
    return [{ ...common, eventType: "message.received", text: input.text, files: input.files, data: { ...data, command: input.command } }];
  }
  if (i.type === InteractionType.MESSAGE_COMPONENT) {
    const values = i.data?.values ?? [];
    // A user, role, mentionable or channel select picks ids: the text names them.
    const kind = selectKind(i.data?.component_type);
    const picked = kind ? values.map((id) => nameOf(kind, id, i.data?.resolved)) : values;
    const text = values.length ? picked.join(" ") : (i.data?.custom_id ?? "");
    return [
      {
        ...common,
        eventType: "message.received",
        text,
        files: [],
        data: { ...data, component: { custom_id: i.data?.custom_id ?? null, component_type: i.data?.component_type ?? null, values }, message_id: i.message?.id ?? null },
      },
    ];
  }
  if (i.type === InteractionType.MODAL_SUBMIT) {
    const inputs = (i.data?.components ?? []).flatMap((row) => row.components ?? (row.component ? [row.component] : []));
    const attachments = i.data?.resolved?.attachments ?? {};
    const files = inputs.flatMap((f) => (f.type === FILE_UPLOAD ? (f.values ?? []).flatMap((id) => (attachments[id] ? [fileOf(attachments[id])] : [])) : []));
    // Each field's value as sent (a checkbox's boolean, an unpicked radio group's null); the text is what was typed or picked.
    const fields = inputs.filter((f) => f.type !== FILE_UPLOAD).map((f) => {
      const kind = selectKind(f.type);
      // A user, role, mentionable or channel select's ids are kept as sent; the text names them.
      const shown = kind && f.values ? f.values.map((id) => nameOf(kind, id, i.data?.resolved)).join(" ") : undefined;
      return { id: f.custom_id ?? "", value: f.value !== undefined ? f.value : (f.values?.join(" ") ?? ""), shown };
    });
    const text = fields.map((f) => f.shown ?? (typeof f.value === "string" ? f.value : "")).filter(Boolean).join("\n");
    return [{ ...common, eventType: "message.received", text, files, data: { ...data, modal: { custom_id: i.data?.custom_id ?? null, fields: Object.fromEntries(fields.map((f) => [f.id, f.value])) } } }];
  }
  return [{ ...common, eventType: null, text: null, files: [], data, replyTarget: null }];
}
