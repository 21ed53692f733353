import * as z from "zod";
import type { Reauthorize } from "../../artifacts/input";
import { HostError } from "../../lib/errors";
import { withoutPaths } from "../redact";
import type { PlatformAdapter } from "../types";
import { bodyKey } from "../unhandled";
import { withinPayloadDepth } from "../verify";
import { pressNotice } from "../press-notice";
import { larkApi, larkMessenger, type LarkCredentials } from "./api";
import { CARD_ACTION } from "./card-action";
import { LEGACY_CARD_ACTION, normalizeLegacyCardAction, openLegacyCardRequest } from "./legacy-card";
import { FORWARD_OPENING, forwardLeftUnread, forwardNotRead, withForwardedMessages } from "./forwarded";
import { mentionsSomeone, normalizeLarkPayload } from "./normalize";
import { ownOpenId } from "./own-open-id";
import { readLarkReplied, recordedLarkReplied } from "./replied";
import { checkLarkApp, openLarkRequest } from "./verify";

const CredentialsSchema = z.strictObject({
  app_id: z.string().min(1).max(128),
  app_secret: z.string().min(1).max(256),
  verification_token: z.string().min(1).max(256),
  encrypt_key: z.string().min(1).max(256).optional(),
});

/**
 * Lark/Feishu event subscriptions over HTTP: the URL challenge answered at
 * once (Lark waits 1 s), plain or encrypted bodies, signatures when an
 * encrypt key is set; retries (for hours) deduplicated by `header.event_id`.
 */
/** `im/v1/files` takes files of up to 30 MB (images up to 10 MB; larger ones go as files). */
const LARK_FILE_MAX_BYTES = 30_000_000;

export const lark: PlatformAdapter<LarkCredentials & { encrypt_key?: string }> = {
  name: "lark",
  credentials: CredentialsSchema,
  newCredentials: CredentialsSchema.extend({ verification_token: z.string().min(16).max(256) }),
  // Feishu's origin; Lark (international) is https://open.larksuite.com, set as api_base_url.
  defaultApiBaseUrl: "https://open.feishu.cn",
  // Card bodies are capped at 30 KB: 9,000 characters stay under it even when every one takes 3 bytes.
  surface: { canEdit: true, maxMessageSize: 9000, maxFileBytes: LARK_FILE_MAX_BYTES, capabilities: { threads: "thread_id", edit: "card_patch" }, idempotentSends: true },
  ackDeadlineMs: 3_000,

  async receive(bot, req) {
    // A press on a legacy message card is signed its own way (./legacy-card.ts); everything else is verified as an event.
    const card = await openLegacyCardRequest(req.headers, req.rawBody, bot.credentials, req.now);
    // Verified first: its token is inside it, so a body too deep to read is refused only once it is known to be Lark's.
    const payload = withinPayloadDepth(card?.payload ?? (await openLarkRequest(req.headers, req.rawBody, bot.credentials, req.now)));
    if (payload.type === "url_verification") return { kind: "handshake", body: { challenge: typeof payload.challenge === "string" ? payload.challenge : "" } };
    checkLarkApp(payload, bot.credentials.app_id);
    // A card callback is sent once (Lark shows the user its failure); events are sent again until answered.
    if (card) return { kind: "events", raw: payload, events: [normalizeLegacyCardAction(await bodyKey(card.plain), payload, card.signedAt)], sentOnce: true };
    // A paused bot calls no platform API: its event is only recorded, its mentions as sent.
    const openId = bot.enabled && mentionsSomeone(payload) ? await ownOpenId(bot, req.apiTimeoutMs) : null;
    const events = normalizeLarkPayload(payload, await bodyKey(req.rawBody), { openId });
    return { kind: "events", raw: payload, events, ...(events.every((e) => e.sourceEventType === CARD_ACTION) ? { sentOnce: true as const } : {}) };
  },

  // Lark wants a 200 within 3 s: `{}` for an event; a card press that starts no answer shows a toast saying why.
  acknowledge: (recorded) => {
    const r = recorded[0];
    const said = r?.event.sourceEventType === CARD_ACTION || r?.event.sourceEventType === LEGACY_CARD_ACTION ? pressNotice(r) : null;
    return said === null ? {} : { toast: { type: "info", content: said } };
  },

  // Only a merged forward is read before it is recorded: its event carries none of its messages.
  readContent: withForwardedMessages,
  contentNotRead: { opening: FORWARD_OPENING, event: forwardNotRead, wasLeft: forwardLeftUnread },
  readReplied: (bot, event, timeoutMs) => readLarkReplied(bot, String(event.repliesTo), timeoutMs),
  recordedReplied: recordedLarkReplied,
  // As a read of its message names it (./replied.ts).
  ownActor: (bot) => ({ actor_type: "bot", actor_id: bot.credentials.app_id, actor_name: null }),

  async download(bot, file, event, timeoutMs) {
    // A file of the message replied to is that message's resource.
    const messageId = file.repliedMessageId ?? event.data.message_id;
    if (typeof messageId !== "string") throw new HostError(400, "attachment_unavailable", "Lark file without its message id");
    const api = larkApi(bot, timeoutMs);
    const token = await api.tenantToken();
    if (!token.ok) throw new HostError(400, "attachment_unavailable", `Lark tenant token: ${token.failure.message}`);
    // A cached token Lark refuses as expired (its API calls retry on that too): fetched anew, the file fetched once more.
    const reauthorize: Reauthorize = async (refusal, timeLeftMs) => {
      const fresh = timeLeftMs > 0 ? await larkApi(bot, timeLeftMs).renewedToken(token.value, refusal.body) : null;
      return fresh === null ? null : { authorization: `Bearer ${fresh}` };
    };
    return { kind: "url", url: api.resourceUrl(messageId, file.ref), headers: { authorization: `Bearer ${token.value}` }, reauthorize, name: file.name, mimeType: file.mimeType, artifactType: file.artifactType };
  },

  // The verification token travels in every payload (v2 header.token, v1 token); a card callback (card.action.trigger)
  // carries `event.token`, which updates that card for 30 minutes, a legacy one (card.action.trigger_v1) `token`.
  redactRaw: (raw) => withoutPaths(raw, [["token"], ["header", "token"], ["event", "token"]]),
  messenger: (bot, target, timeoutMs, opts) => {
    if (target.platform !== "lark") throw new Error("not a Lark target");
    return larkMessenger(bot, target, timeoutMs, opts?.scope, opts?.format);
  },
  replyTargetView: (t) => (t.platform === "lark" ? { chat_id: t.chatId, reply_to_message_id: t.replyToMessageId, reply_in_thread: t.replyInThread } : {}),
};
