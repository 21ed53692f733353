/**
 * Answering a deferred interaction: the first message edits the original
 * response, later ones are follow-ups; both are edited by id. The interaction
 * token in the path is the credential (15 minutes), so URLs are never logged.
 * A run queued or running past those 15 minutes would lose its answer: once
 * Discord refuses the token, the reply continues in the interaction's channel
 * under the bot token, and its first message replaces the "thinking…"
 * placeholder, found among the channel's messages by its interaction's id. A reply whose "thinking…" (or first message)
 * was deleted meanwhile, after which Discord takes nothing more by the token, continues there too, as new messages.
 * Where the channel will not do (an app
 * installed only to the user, an ephemeral answer, a channel that refuses the bot), it continues in a DM to the user
 * instead (./dm.ts). Rate limits answer 429 with `retry_after` (seconds, fractional) in the body; a route's bucket spent is waited out before its
 * next call (./route-limits.ts). An app installed only to the user has 5 follow-ups per interaction (./followup-limit.ts).
 */
import { pathSegment } from "../../lib/url";
import { asRecord, callPlatform, failureOfStatus, repeatable, requestInit } from "../http";
import { scrubSecrets } from "../redact";
import type { ApiFailure, ApiResult, Bot, DeliveryTarget, Messenger, OutgoingFile } from "../types";
import { UploadForm, uploadTimeoutMs } from "../upload";
import { DM_NOTE, dmRefused, openDm, refusalCode } from "./dm";
import { FollowupBudget, followupLimitFailure, MAX_FOLLOWUPS_CODE, withCutNotice } from "./followup-limit";
import { botTokenLimits, retryAfterOf, RouteLimits } from "./route-limits";

export interface DiscordCredentials extends Record<string, string> {
  application_id: string;
  public_key: string;
  bot_token: string;
}

const ORIGINAL = "@original";

/** No @everyone, role or user pings from an agent's text. */
const payload = (content: string) => ({ content, allowed_mentions: { parse: [] } });
/** A message flag: only the user who interacted sees it. */
const EPHEMERAL = 64;

/** What a write carries: a message's text, or a file (each attempt builds a new form for it). */
type Content = string | OutgoingFile;

/** Discord's answers for an interaction token it no longer honours (expired after 15 minutes, or unknown). */
const EXPIRED_TOKEN_CODES = new Set([50027, 10015]);
/**
 * Discord's "Unknown Message" (404): on the deferred response's edit or a follow-up, the "thinking…" message (or the
 * answer's first message) was deleted, and Discord then takes nothing more by the interaction's token (its follow-ups
 * included: discord/discord-api-docs#3087). On an edit of a follow-up by its id, only that message is gone.
 */
const UNKNOWN_MESSAGE = 10008;
/** Reads of the channel's history for the placeholder that may fail for now (rate limited, unavailable) before the answer is a new message. */
const PLACEHOLDER_SEARCHES = 2;

export function discordMessenger(bot: Bot<DiscordCredentials>, target: Extract<DeliveryTarget, { platform: "discord" }>, timeoutMs: number): Messenger {
  const webhook = `${bot.apiBaseUrl}/webhooks/${encodeURIComponent(bot.credentials.application_id)}/${pathSegment(target.interactionToken)}`;
  const channel = target.channelId ? `${bot.apiBaseUrl}/channels/${pathSegment(target.channelId)}/messages` : null;
  /**
   * Past the token, the answer goes to the user's DM rather than the channel (./dm.ts). A reply queued before targets
   * named their user has no DM to go to: it tries the channel, as it did then, unless it is the user's alone.
   */
  const startsInDm = target.ephemeral === true || (target.followupLimit !== undefined && target.userId !== undefined);
  const canContinue = startsInDm ? target.userId !== undefined : channel !== null;
  /** New messages go to the DM: from the start, or once the channel refused the bot (403) and the user is known. */
  let toDm = startsInDm;
  const botAuth = { authorization: `Bot ${bot.credentials.bot_token}` };
  // Scrubbed as it is and percent-encoded (the form a quoted URL has it in): scrubSecrets looks for both.
  const interactionSecrets = { token: target.interactionToken };
  let originalUsed = false;
  /** The deferred response's message id, from its first edit: the bot token can edit it by id once the interaction token is gone. */
  let originalId: string | null = null;
  /** The interaction token was refused: every later write goes through the channel (or the DM). */
  let viaChannel = false;
  /** The content of a first-message edit that got no answer (it may have been applied); null when there was none. */
  let originalMaybe: Content | null = null;
  /** The "thinking…" message found in the channel once the token was refused: undefined until sought, null when there is none to use. */
  let placeholder: string | null | undefined = startsInDm ? null : undefined;
  let searchesFailed = 0;
  /** The DM's messages URL once opened and its note posted; its refusal, kept once Discord gave it; the messages posted there. */
  let dm: string | null = null;
  let dmRefusal: { ok: false; failure: ApiFailure } | null = null;
  const dmMessages = new Set<string>();
  /** The interaction's webhook has buckets of its own; calls under the bot token share the bot's (./route-limits.ts). */
  const webhookLimits = new RouteLimits();
  const botLimits = botTokenLimits(bot.botId);
  const limitsOf = (url: string) => (url.startsWith(webhook) ? webhookLimits : botLimits);
  const budget = new FollowupBudget(target.followupLimit);
  /** A call's rate-limit route: its method and endpoint, whichever message it names (Discord's buckets go by route and its channel). */
  const routeOf = (method: string, url: string) =>
    url.startsWith(webhook)
      ? `${method} webhook${/\/messages\/[^/?]+(?:\?|$)/.test(url) ? "/message" : ""}`
      : `${method} ${url.slice(bot.apiBaseUrl.length).split("?")[0].replace(/\/messages\/[^/]+$/, "/messages/:id")}`;

  /** A refusal as the retry loop reads it; a refused interaction token is told apart (the channel takes over). */
  function failureOf(status: number, headers: Headers, data: Record<string, unknown>): { ok: false; failure: ApiFailure } {
    // The interaction token is a credential of its own, not the bot's: an answer quoting the URL must not carry it on.
    const message = typeof data.message === "string" ? scrubSecrets(data.message, interactionSecrets) : `HTTP ${status}`;
    const retryAfterMs = retryAfterOf(data, headers);
    const expired = EXPIRED_TOKEN_CODES.has(data.code as number) && (status === 401 || status === 404);
    const code = expired ? "discord_interaction_expired" : status === 404 && data.code === UNKNOWN_MESSAGE ? "discord_unknown_message" : refusalCode(status, data);
    if (data.code === MAX_FOLLOWUPS_CODE && status === 400) return followupLimitFailure(status);
    return { ok: false, failure: failureOfStatus(status, code, message, retryAfterMs) };
  }

  /**
   * A message's text, or a form carrying a file (its `payload_json` says the same as a text message's JSON). A follow-up
   * of an ephemeral answer is ephemeral too; an edit keeps what its message is, and the bot's own posts cannot be.
   */
  async function call(method: string, url: string, content: Content, headers: Record<string, string> = {}): Promise<ApiResult<Record<string, unknown>>> {
    const json = { ...payload(typeof content === "string" ? content : ""), ...(target.ephemeral && method === "POST" && url.startsWith(webhook) ? { flags: EPHEMERAL } : {}) };
    const body = () => (typeof content === "string" ? json : new UploadForm({ payload_json: JSON.stringify({ ...json, attachments: [{ id: 0, filename: content.name }] }) }, "files[0]", content));
    const route = routeOf(method, url);
    const limits = limitsOf(url);
    await limits.ready(route, timeoutMs);
    const reply = await callPlatform(url, () => requestInit(method, body(), headers), typeof content === "string" ? timeoutMs : uploadTimeoutMs(timeoutMs, content));
    if (!reply.ok) return reply;
    const { status, headers: replyHeaders, json: answer } = reply.value;
    const data = asRecord(answer);
    limits.noted(route, status, replyHeaders, retryAfterOf(data, replyHeaders));
    return status >= 200 && status < 300 ? { ok: true, value: data } : failureOf(status, replyHeaders, data);
  }

  /**
   * A webhook write, unless the token is refused, or the interaction's response was deleted, and there is a place to
   * continue in: then `null`, and that place takes over (a deleted "thinking…" is not looked for).
   */
  async function viaWebhook(method: string, url: string, content: Content): Promise<ApiResult<Record<string, unknown>> | null> {
    if (viaChannel) return null;
    const res = await call(method, url, content);
    const deleted = !res.ok && res.failure.code === "discord_unknown_message" && (method === "POST" || url.endsWith(`/messages/${ORIGINAL}`));
    if (res.ok || !canContinue || (res.failure.code !== "discord_interaction_expired" && !deleted)) return res;
    if (deleted) placeholder = null;
    viaChannel = true;
    return null;
  }

  /** Where a new message goes once the token is refused: the channel, or the DM (opened, and its note posted, once). */
  async function continuedIn(): Promise<ApiResult<string>> {
    if (!toDm) return { ok: true, value: channel! };
    if (dm) return { ok: true, value: dm };
    if (dmRefusal) return dmRefusal;
    const opened = await openDm(bot.apiBaseUrl, bot.credentials.bot_token, target.userId!, botLimits, timeoutMs);
    if (!opened.ok && opened.failure.kind === "permanent") dmRefusal = opened;
    if (!opened.ok) return opened;
    const url = `${bot.apiBaseUrl}/channels/${pathSegment(opened.value)}/messages`;
    const noted = await call("POST", url, DM_NOTE, botAuth);
    if (!noted.ok && noted.failure.kind === "permanent") dmRefusal = dmRefused(noted.failure);
    if (dmRefusal) return dmRefusal;
    // Not posted for now (or maybe posted): the send is tried again, note first; a note twice is better than none.
    if (!noted.ok) return repeatable(noted);
    dm = url;
    return { ok: true, value: dm };
  }

  /**
   * The deferred response's message id, when the token was refused before it was ever edited: the channel's first
   * messages after the interaction include it, marked with the interaction's id (the bot needs to read the channel's
   * history). Not found, or the history refused (no Read Message History), the answer is a new message and the
   * placeholder stays. A read rate limited or unanswered is a failure for now: a read writes nothing, so it is repeatable.
   */
  async function placeholderId(): Promise<ApiResult<string | null>> {
    const url = `${channel!}?after=${pathSegment(target.interactionId)}&limit=50`;
    await botLimits.ready(routeOf("GET", url), timeoutMs);
    const res = await callPlatform(url, { method: "GET", headers: botAuth }, timeoutMs);
    if (!res.ok) return repeatable(res);
    const { status, headers, json } = res.value;
    botLimits.noted(routeOf("GET", url), status, headers, retryAfterOf(asRecord(json), headers));
    if (status === 429 || status >= 500) return repeatable(failureOf(status, headers, asRecord(json)));
    if (status !== 200 || !Array.isArray(json)) return { ok: true, value: null };
    const placeholder = json.map(asRecord).find((m) => [m.interaction_metadata, m.interaction].some((i) => asRecord(i).id === target.interactionId));
    return { ok: true, value: typeof placeholder?.id === "string" ? placeholder.id : null };
  }

  /** The first message answers the deferred response; the rest are follow-ups (or channel messages, once the token is gone). */
  async function post(content: Content): Promise<ApiResult<string>> {
    const res = await posted(content);
    if (!res.ok && res.failure.code === "discord_followup_limit") return followupsSpent(res.failure.status);
    // What it shows, for the notice should the follow-ups run out after it (a file's message has no text).
    if (res.ok) budget.shown(res.value, typeof content === "string" ? content : "", res.value !== ORIGINAL && originalUsed && !viaChannel);
    return res;
  }

  /** Past the follow-ups Discord takes: the last message shown says the rest was cut (once), and the send is refused. */
  async function followupsSpent(status: number | null): Promise<ApiResult<string>> {
    // Discord's own refusal counts too (the interaction did not say it was limited): no more follow-ups are tried.
    budget.close();
    const notice = budget.noticeEdit();
    if (notice) {
      const edited = await editMessage(notice.id, withCutNotice(notice.text));
      if (edited.ok) budget.noticed(notice.id);
      // Rate limited or unanswered for now: the send is tried again, and with it the notice (an edit can be repeated).
      else if (edited.failure.kind !== "permanent") return repeatable(edited);
    }
    return followupLimitFailure(status);
  }

  async function posted(content: Content): Promise<ApiResult<string>> {
    if (originalUsed && !viaChannel && budget.spent) return followupLimitFailure(null);
    // The first message may have been written by an edit that got no answer: a different text is not written over it.
    if (!originalUsed && originalMaybe !== null && originalMaybe !== content) originalUsed = true;
    const res = originalUsed ? await viaWebhook("POST", `${webhook}?wait=true`, content) : await viaWebhook("PATCH", `${webhook}/messages/${ORIGINAL}`, content);
    if (res && !res.ok && !originalUsed && res.failure.maybeApplied) {
      originalMaybe = content;
      // An edit that may have been applied can be made again (the same text twice shows once).
      return repeatable(res);
    }
    if (res && !res.ok) return res;
    if (res && !originalUsed) {
      originalUsed = true;
      originalId = typeof res.value.id === "string" ? res.value.id : null;
      return { ok: true, value: ORIGINAL };
    }
    if (res) return { ok: true, value: String(res.value.id) };
    // Each call streams an upload's file anew, so the refused file itself goes to the channel (or the DM).
    if (!originalUsed && placeholder === undefined) {
      const sought = await placeholderId();
      if (sought.ok) placeholder = sought.value;
      // Rate limited or unavailable for now: the send's retry looks again (waiting what Discord asks); still failing, a new message.
      else if (++searchesFailed < PLACEHOLDER_SEARCHES) return sought;
      else placeholder = null;
    }
    if (!originalUsed && placeholder) {
      const edited = await call("PATCH", `${channel!}/${pathSegment(placeholder)}`, content, botAuth);
      if (edited.ok) {
        originalUsed = true;
        originalId = placeholder;
        return { ok: true, value: ORIGINAL };
      }
      // Rate limited or unavailable for now: the retry edits the same message. Refused for good: a new message instead.
      if (edited.failure.kind !== "permanent") return repeatable(edited);
      placeholder = null;
    }
    return postNew(content);
  }

  /** A new message where the answer continues once the token is refused: the channel, or the DM. */
  async function postNew(content: Content): Promise<ApiResult<string>> {
    const place = await continuedIn();
    if (!place.ok) return place;
    const sent = await call("POST", place.value, content, botAuth);
    // The channel refuses the bot (no View Channel or Send Messages there, which an interaction's answer never needed, or
    // the app was added without its bot): the asker still gets the answer, in a DM, rather than a 403 for every part.
    if (!sent.ok && !toDm && sent.failure.status === 403 && target.userId !== undefined) {
      toDm = true;
      return postNew(content);
    }
    // The user stopped taking DMs from the app meanwhile: kept, as a refusal of the DM itself is.
    if (!sent.ok && toDm && sent.failure.status === 403) dmRefusal = dmRefused(sent.failure);
    if (!sent.ok) return dmRefusal ?? sent;
    if (toDm) dmMessages.add(String(sent.value.id));
    return { ok: true, value: String(sent.value.id) };
  }

  async function editMessage(messageId: string, text: string): Promise<ApiResult<void>> {
    const res = await viaWebhook("PATCH", `${webhook}/messages/${messageId === ORIGINAL ? ORIGINAL : pathSegment(messageId)}`, text);
    if (res) return res.ok ? { ok: true, value: undefined } : res;
    const id = messageId === ORIGINAL ? originalId : messageId;
    // A message posted in the DM is edited there; one in the channel there, unless the answer was never the channel's
    // (an ephemeral one, an app installed only to the user): only the interaction's token could edit it (the text is sent anew).
    const where = id && dmMessages.has(id) ? dm : startsInDm ? null : channel;
    if (!id || !where) return { ok: false, failure: { kind: "permanent", status: null, code: "discord_interaction_expired", message: "the message can no longer be edited: its interaction's token expired" } };
    const edited = await call("PATCH", `${where}/${pathSegment(id)}`, text, botAuth);
    return edited.ok ? { ok: true, value: undefined } : edited;
  }

  return {
    send: (text) => post(text),
    sendFile: (file) => post(file),
    // The message carrying the cut notice keeps it through later edits.
    edit: (messageId, text) => editMessage(messageId, budget.editing(messageId, text)),
  };
}
