import * as z from "zod";
import { headerValue } from "../../resources/ids";
import { pressNotice } from "../press-notice";
import { withoutPaths } from "../redact";
import type { PlatformAdapter, Recorded } from "../types";
import { bodyKey, unhandledEvent } from "../unhandled";
import { parseBody } from "../verify";
import { discordMessenger, type DiscordCredentials } from "./api";
import { DISCORD_MAX_CONTENT } from "./followup-limit";
import { InteractionSchema, InteractionType, normalizeInteraction } from "./normalize";
import { checkDiscordApplication, verifyDiscordSignature } from "./verify";

const CredentialsSchema = z.strictObject({
  application_id: z.string().regex(/^\d{1,30}$/, "application_id must be the application's snowflake id"),
  public_key: z.string().regex(/^[0-9a-fA-F]{64}$/, "public_key must be the application's 32-byte Ed25519 key in hex"),
  bot_token: headerValue(256).min(1),
});

/** Interaction response types. */
const PONG = 1;
const CHANNEL_MESSAGE = 4;
const DEFERRED_CHANNEL_MESSAGE = 5;
const AUTOCOMPLETE_RESULT = 8;
const EPHEMERAL = 64;

/** A bot's attachments in a server without boosts: 10 MiB per message. */
const DISCORD_UPLOAD_MAX_BYTES = 10 * 1024 * 1024;
/**
 * Discord renders an answer's Markdown itself, but no table: the host sends each as an aligned code block, or as a
 * record per row when its lines would be wider than this many characters (a window beside the channel list).
 */
const DISCORD_TABLE_COLUMNS = 60;

const notice = (content: string) => ({ type: CHANNEL_MESSAGE, data: { content, flags: EPHEMERAL } });

/** What the user sees at once: "thinking..." when a run will edit it, else a short private notice. */
function acknowledge(recorded: Recorded[]): unknown {
  const r = recorded[0];
  const said = pressNotice(r);
  if (said !== null) return notice(said);
  // An answer to a press on an ephemeral message is ephemeral too: the "thinking…" it edits, and its follow-ups.
  const ephemeral = r.event.replyTarget?.platform === "discord" && r.event.replyTarget.ephemeral === true;
  return { type: DEFERRED_CHANNEL_MESSAGE, ...(ephemeral ? { data: { flags: EPHEMERAL } } : {}) };
}

/**
 * Discord interactions over HTTP: Ed25519-signed, PING answered with PONG,
 * everything else acknowledged within 3 s (deferred) and answered by editing
 * the original response and posting follow-ups. Deduplicated by interaction id.
 */
export const discord: PlatformAdapter<DiscordCredentials> = {
  name: "discord",
  credentials: CredentialsSchema,
  defaultApiBaseUrl: "https://discord.com/api/v10",
  // Message content is at most 2,000 characters; the deferred response and follow-ups are editable.
  surface: { canEdit: true, maxMessageSize: DISCORD_MAX_CONTENT, tableColumns: DISCORD_TABLE_COLUMNS, maxFileBytes: DISCORD_UPLOAD_MAX_BYTES, capabilities: { interactions: true, followups: true }, awaitsAnswer: true },
  ackDeadlineMs: 3_000,

  async receive(bot, req) {
    await verifyDiscordSignature(req.headers, req.rawBody, bot.credentials.public_key, req.now);
    const body = parseBody(req.rawBody);
    checkDiscordApplication(body, bot.credentials.application_id);
    const interaction = InteractionSchema.safeParse(body);
    if (!interaction.success) return { kind: "events", raw: body, events: [unhandledEvent(await bodyKey(req.rawBody), "unknown")], sentOnce: true };
    if (interaction.data.type === InteractionType.PING) return { kind: "handshake", body: { type: PONG } };
    // Each keystroke in an autocomplete option is an interaction wanting choices within 3 s. The host offers none:
    // answered at once, with nothing stored or recorded (a row per keystroke would tell an operator nothing).
    if (interaction.data.type === InteractionType.AUTOCOMPLETE) return { kind: "handshake", body: { type: AUTOCOMPLETE_RESULT, data: { choices: [] } } };
    // The payload as parsed, not as the schema rebuilt it: the stored copy keeps Discord's own key order. Discord never
    // sends an interaction again: one not answered in 3 s is "interaction failed" for good.
    return { kind: "events", raw: body, events: normalizeInteraction(interaction.data), sentOnce: true };
  },

  acknowledge,

  async download(_bot, file) {
    return { kind: "url", url: file.ref, name: file.name, mimeType: file.mimeType, artifactType: file.artifactType };
  },

  // The interaction token answers for the bot for 15 minutes.
  redactRaw: (raw) => withoutPaths(raw, [["token"]]),
  messenger: (bot, target, timeoutMs) => {
    if (target.platform !== "discord") throw new Error("not a Discord target");
    return discordMessenger(bot, target, timeoutMs);
  },
  replyTargetView: (t) => (t.platform === "discord" ? { channel_id: t.channelId, interaction_id: t.interactionId } : {}),
};
