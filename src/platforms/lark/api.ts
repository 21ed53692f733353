/**
 * Lark/Feishu Open API: a tenant access token from app_id + app_secret
 * (cached per isolate until shortly before it expires), message replies,
 * card patches, image and file uploads, and message resources. Answers are
 * `{code, msg, data}`; code 0 is success.
 */
import { sha256Hex } from "../../lib/crypto";
import { loggedId } from "../../lib/log-text";
import { pathSegment } from "../../lib/url";
import { asRecord, callPlatform, failureOfStatus, repeatable, requestInit, retryAfterHeaderMs } from "../http";
import type { ApiFailure, ApiResult, Bot, DeliveryTarget, Messenger, OutgoingFile, TextFormat } from "../types";
import { scrubSecrets } from "../redact";
import { mediaEssence, UploadForm, uploadTimeoutMs } from "../upload";
import { larkContent, type LarkContent } from "./content";
import { chatRefusal, messageGone } from "./gone";

export interface LarkCredentials extends Record<string, string> {
  app_id: string;
  app_secret: string;
  verification_token: string;
}

/** Lark's "too many requests" codes, often sent with HTTP 400: the app's own limit, a chat's 5 messages a second, the tenant's. */
const RATE_LIMITED = new Set([99991400, 230020, 11232]);
/** Token invalid or expired: fetch a new one and retry. */
const TOKEN_INVALID = new Set([99991661, 99991663, 99991668]);
/** Refresh this long before Lark says the token expires. */
const TOKEN_MARGIN_MS = 5 * 60_000;

const tokens = new Map<string, { token: string; expiresAt: number }>();
/**
 * The secret is part of the key (it stays in this isolate's memory, as the credentials do): a bot whose secret is
 * wrong, or was just replaced, must fetch its own token, not borrow one another bot of the same app fetched.
 */
const tokenKey = (bot: Bot<LarkCredentials>) => `${bot.apiBaseUrl}\n${bot.credentials.app_id}\n${bot.credentials.app_secret}`;

function failureOf(status: number, headers: Headers, body: Record<string, unknown>): ApiFailure {
  const code = typeof body.code === "number" ? body.code : null;
  const message = typeof body.msg === "string" ? body.msg : `HTTP ${status}`;
  const retryAfterMs = retryAfterHeaderMs(headers, "x-ogw-ratelimit-reset") ?? retryAfterHeaderMs(headers);
  if (status === 429 || (code !== null && RATE_LIMITED.has(code))) return { kind: "rate_limited", status, code: "rate_limited", message, retryAfterMs };
  if (code !== null && TOKEN_INVALID.has(code)) return { kind: "transient", status, code: `lark_${code}`, message };
  if (status >= 400 || code === null) return failureOfStatus(status, code === null ? `lark_http_${status}` : `lark_${code}`, message, retryAfterMs);
  return { kind: "permanent", status, code: `lark_${code}`, message };
}

export function larkApi(bot: Bot<LarkCredentials>, timeoutMs: number) {
  async function tenantToken(): Promise<ApiResult<string>> {
    const cached = tokens.get(tokenKey(bot));
    if (cached && cached.expiresAt > Date.now()) return { ok: true, value: cached.token };
    const reply = await callPlatform(
      `${bot.apiBaseUrl}/open-apis/auth/v3/tenant_access_token/internal`,
      { method: "POST", headers: { "content-type": "application/json; charset=utf-8" }, body: JSON.stringify({ app_id: bot.credentials.app_id, app_secret: bot.credentials.app_secret }) },
      timeoutMs,
    );
    if (!reply.ok) return reply;
    const body = asRecord(reply.value.json);
    if (body.code !== 0 || typeof body.tenant_access_token !== "string") return { ok: false, failure: failureOf(reply.value.status, reply.value.headers, body) };
    const expire = typeof body.expire === "number" ? body.expire * 1000 : 3_600_000;
    tokens.set(tokenKey(bot), { token: body.tenant_access_token, expiresAt: Date.now() + Math.max(expire - TOKEN_MARGIN_MS, 60_000) });
    return { ok: true, value: body.tenant_access_token };
  }

  /** JSON parameters, a multipart form for an upload, or null for a call without a body (a GET). */
  async function call(method: string, path: string, params: Record<string, unknown> | UploadForm | null): Promise<ApiResult<Record<string, unknown>>> {
    const token = await tenantToken();
    if (!token.ok) return token;
    const callTimeoutMs = params instanceof UploadForm ? uploadTimeoutMs(timeoutMs, params.file) : timeoutMs;
    const authorization = `Bearer ${token.value}`;
    const init = () => (params === null ? { method, headers: { authorization } } : requestInit(method, params, { authorization }));
    const reply = await callPlatform(`${bot.apiBaseUrl}${path}`, init, callTimeoutMs);
    if (!reply.ok) return reply;
    const body = asRecord(reply.value.json);
    if (reply.value.status === 200 && body.code === 0) return { ok: true, value: asRecord(body.data) };
    // The tenant token is derived, not among the bot's credentials that records are scrubbed of: scrubbed here.
    const failure = failureOf(reply.value.status, reply.value.headers, body);
    failure.message = scrubSecrets(failure.message, { tenant: token.value });
    if (failure.code.startsWith("lark_") && TOKEN_INVALID.has(Number(failure.code.slice(5)))) forget(token.value);
    return { ok: false, failure };
  }

  /** A token Lark refused leaves the cache, unless another call already replaced it. */
  function forget(stale: string) {
    if (tokens.get(tokenKey(bot))?.token === stale) tokens.delete(tokenKey(bot));
  }

  return {
    call,
    tenantToken,
    /** A token fetched anew when Lark's answer (a JSON body) refused `stale` as invalid or expired; else null. */
    async renewedToken(stale: string, refusal: string): Promise<string | null> {
      let code: unknown;
      try {
        code = asRecord(JSON.parse(refusal)).code;
      } catch {
        return null;
      }
      if (typeof code !== "number" || !TOKEN_INVALID.has(code)) return null;
      forget(stale);
      const fresh = await tenantToken();
      return fresh.ok && fresh.value !== stale ? fresh.value : null;
    },
    resourceUrl: (messageId: string, fileRef: string) => {
      const [type, key] = [fileRef.slice(0, fileRef.indexOf(":")), fileRef.slice(fileRef.indexOf(":") + 1)];
      return `${bot.apiBaseUrl}/open-apis/im/v1/messages/${pathSegment(messageId)}/resources/${pathSegment(key)}?type=${type}`;
    },
  };
}

/** Lark's refusal of a card it cannot build ("Failed to create card content": more tables than it takes, say). */
const CARD_REFUSED = "lark_230099";
/** "The messages do NOT pass the audit": the tenant's content check (DLP) refused what the message says. */
const CONTENT_REFUSED = "lark_230028";
/** Said in the chat, once per run, in place of what the content check refused: its words are the host's, so they pass. */
const WITHHELD_NOTICE = "(This answer was withheld: this organization's content policy blocked it.)";
const PART_WITHHELD_NOTICE = "(Part of this answer was withheld: this organization's content policy blocked it.)";

const LARK_IMAGE_MAX_BYTES = 10 * 1024 * 1024;
/** What im/v1/images takes; any other image (an SVG, say) goes up as a file. */
const LARK_IMAGE_TYPES = new Set(["image/jpeg", "image/png", "image/webp", "image/gif", "image/tiff", "image/bmp", "image/x-icon", "image/vnd.microsoft.icon"]);

export function larkMessenger(bot: Bot<LarkCredentials>, target: Extract<DeliveryTarget, { platform: "lark" }>, timeoutMs: number, scope = "", format: TextFormat = "markdown"): Messenger {
  const api = larkApi(bot, timeoutMs);
  let sent = 0;
  /** The last text Lark refused as rendered: its next attempt (calls are made one at a time) goes as it is. */
  let refused: string | null = null;
  const contentOf = (text: string, editable: boolean) => larkContent(text, { editable, format, asIs: text === refused });
  /** A refusal of the rendering is flagged, for the delivery session to make the call again at once. */
  const plainNext = <T>(res: ApiResult<T>, text: string, body: LarkContent): ApiResult<T> => {
    if (res.ok || !body.rendered || res.failure.code !== CARD_REFUSED) return res;
    refused = text;
    return { ok: false, failure: { ...res.failure, refusedFormatting: true } };
  };
  /** Each file's key from its upload, and what it went up as: a retried send posts the same content, so its uuid lets Lark drop a repeat. */
  const uploadedKeys = new WeakMap<OutgoingFile, { key: string; image: boolean }>();
  /** Images Lark refused as images: a retry goes straight to the file upload. */
  const refusedImages = new WeakSet<OutgoingFile>();
  /** One upload: an image as Lark shows one (im/v1/images), else a file. Shows nothing in the chat, so it is safe to repeat. */
  async function upload(file: OutgoingFile, image: boolean): Promise<ApiResult<string>> {
    const form = image ? new UploadForm({ image_type: "message" }, "image", file) : new UploadForm({ file_type: "stream", file_name: file.name }, "file", file);
    const uploaded = await api.call("POST", image ? "/open-apis/im/v1/images" : "/open-apis/im/v1/files", form);
    if (!uploaded.ok) return repeatable(uploaded);
    const given = image ? uploaded.value.image_key : uploaded.value.file_key;
    return typeof given === "string" ? { ok: true, value: given } : { ok: false, failure: { kind: "permanent", status: 200, code: "lark_no_key", message: "the upload answered without a key" } };
  }
  /**
   * The message replied to. Gone before the answer came (recalled, deleted: ./gone.ts), as README promises an answer to
   * a message its runner had: its topic thread's root (in the thread), else the chat as a new message; for every send
   * after it too.
   */
  let replyTo = target.replyToMessageId;
  let withheldSaid = false;
  /**
   * A refusal of what an answer says stays the send's outcome (recorded, noted on the bot), but the chat is told once,
   * so the user does not wait on silence; a refusal of the place (the bot removed, no permission) would refuse a notice too.
   */
  async function saidWithheld(refusal: { ok: false; failure: ApiFailure }): Promise<ApiResult<string>> {
    withheldSaid = true;
    const notice = await post("text", JSON.stringify({ text: sent > 0 ? PART_WITHHELD_NOTICE : WITHHELD_NOTICE }));
    if (notice.ok) return { ok: false, failure: { ...refusal.failure, message: `${refusal.failure.message} (the chat was told it was withheld: message ${notice.value})` } };
    if (notice.failure.kind === "permanent") return refusal;
    // Not posted for now (the chat's rate limit, no answer): the send is tried again when the notice may be, and with
    // it the notice (a repeat of one that did land has the same uuid: Lark drops it).
    withheldSaid = false;
    const { kind, retryAfterMs } = notice.failure;
    return { ok: false, failure: { ...refusal.failure, kind, retryAfterMs, maybeApplied: false, message: `${refusal.failure.message} (the chat is not told yet: ${notice.failure.message})` } };
  }
  async function post(msgType: string, content: string): Promise<ApiResult<string>> {
    // Lark drops a repeated uuid within an hour: a retried send after a lost answer is not posted twice. The content
    // is part of it, so a different message in the same place (the final text after a streamed card whose answer was
    // lost) is never taken for that retry and dropped.
    const uuid = (await sha256Hex(`${scope}\n${replyTo ?? target.chatId}\n${sent}\n${msgType}\n${content}`)).slice(0, 32);
    const res =
      replyTo === null
        ? await api.call("POST", "/open-apis/im/v1/messages?receive_id_type=chat_id", { receive_id: target.chatId, msg_type: msgType, content, uuid })
        : await api.call("POST", `/open-apis/im/v1/messages/${pathSegment(replyTo)}/reply`, { msg_type: msgType, content, reply_in_thread: target.replyInThread, uuid });
    const gone = res.ok || replyTo === null ? null : messageGone(res.failure);
    if (gone !== null && replyTo !== null) {
      const root = target.threadRootId ?? null;
      console.warn(`lark bot ${bot.botId}: message ${loggedId(replyTo)} is ${gone}; the answer goes to ${root !== null && root !== replyTo ? `its thread's root ${loggedId(root)}` : `chat ${loggedId(target.chatId)}`}`);
      replyTo = root !== replyTo ? root : null;
      return post(msgType, content);
    }
    if (!res.ok && res.failure.code === CONTENT_REFUSED && !withheldSaid) return saidWithheld(res);
    if (!res.ok) return chatRefusal(res);
    sent++;
    return { ok: true, value: String(res.value.message_id) };
  }
  return {
    async send(text, { editable }) {
      // Only cards can be patched, so a message that will be edited is a card.
      const body = contentOf(text, editable);
      return plainNext(await post(body.msgType, body.content), text, body);
    },
    /**
     * Uploaded first (images Lark shows, ≤ 10 MB, as images; the rest, and an image Lark refuses as one, as files), then
     * sent by the key Lark gave it. The upload shows nothing in the chat, so it is safe to repeat; a retry after it
     * reuses its key.
     */
    async sendFile(file) {
      let done = uploadedKeys.get(file);
      if (done === undefined) {
        let image = file.kind === "image" && file.size <= LARK_IMAGE_MAX_BYTES && LARK_IMAGE_TYPES.has(mediaEssence(file.mimeType)) && !refusedImages.has(file);
        let uploaded = await upload(file, image);
        // An image Lark will not take as one (its pixel size, data it cannot read) still reaches the chat, as a file.
        if (!uploaded.ok && image && uploaded.failure.kind === "permanent") {
          refusedImages.add(file);
          [image, uploaded] = [false, await upload(file, false)];
        }
        if (!uploaded.ok) return uploaded;
        done = { key: uploaded.value, image };
        uploadedKeys.set(file, done);
      }
      return done.image ? post("image", JSON.stringify({ image_key: done.key })) : post("file", JSON.stringify({ file_key: done.key }));
    },
    async edit(messageId, text) {
      const body = contentOf(text, true);
      const res = await api.call("PATCH", `/open-apis/im/v1/messages/${pathSegment(messageId)}`, { content: body.content });
      return res.ok ? { ok: true, value: undefined } : plainNext(chatRefusal(res), text, body);
    },
  };
}
