/**
 * A press on a legacy message card: Lark's older "Message Card Request URL" (card.action.trigger_v1), outside the v2
 * event schema. Its body carries the card's own update token, not the verification token; the request is signed with
 * the verification token instead: `X-Lark-Signature` is hex SHA-1(timestamp + nonce + verification token + raw body)
 * (Lark's SDKs: larkcard VerifySign), the body encrypted as events are when an encrypt key is set. Verified so, it
 * becomes the press `card.action.trigger` would (./card-action.ts).
 */
import { constantTimeEqual, toHex } from "../../lib/crypto";
import { platformTime } from "../../lib/json";
import { asRecord } from "../http";
import { withoutNulls } from "../payload";
import type { NormalizedEvent } from "../types";
import { checkFreshness, refused } from "../verify";
import { normalizeCardAction } from "./card-action";
import { decryptLarkBody, type LarkSecrets } from "./verify";

export const LEGACY_CARD_ACTION = "card.action.trigger_v1";

/**
 * Lark never redelivers a press (it waits 3 s for the answer, then shows the presser an error): a signed one older
 * than this is a replay. A repeat within it is refused as a duplicate (its key: the digest of what it says).
 */
export const LARK_CARD_MAX_AGE_SECONDS = 5 * 60;

export async function larkCardSignature(timestamp: string, nonce: string, verificationToken: string, rawBody: string): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-1", new TextEncoder().encode(timestamp + nonce + verificationToken + rawBody)));
}

export interface LegacyCardRequest {
  /** The decrypted payload: a press, or the card URL's challenge. */
  payload: Record<string, unknown>;
  /** Its text as decrypted, the same for a body encrypted anew. */
  plain: string;
  /** The signed timestamp, Unix seconds. */
  signedAt: number;
}

/**
 * The request when it is signed as a legacy card callback and is one (a press or the URL challenge); null for every
 * other request (an event, a v2 card callback), which openLarkRequest verifies as before.
 */
export async function openLegacyCardRequest(headers: Headers, rawBody: string, secrets: LarkSecrets, now: number): Promise<LegacyCardRequest | null> {
  const [timestamp, nonce, signature] = ["x-lark-request-timestamp", "x-lark-request-nonce", "x-lark-signature"].map((h) => headers.get(h));
  if (!timestamp || !nonce || !signature) return null;
  if (!constantTimeEqual(signature, await larkCardSignature(timestamp, nonce, secrets.verification_token, rawBody))) return null;
  let payload: Record<string, unknown>;
  try {
    payload = asRecord(JSON.parse(rawBody));
  } catch {
    throw refused("the body is not JSON");
  }
  let plain = rawBody;
  if (typeof payload.encrypt === "string") {
    if (!secrets.encrypt_key) throw refused("the body is encrypted but no encrypt key is registered");
    try {
      plain = await decryptLarkBody(secrets.encrypt_key, payload.encrypt);
      payload = asRecord(JSON.parse(plain));
    } catch {
      throw refused("the body does not decrypt with the encrypt key");
    }
  }
  const press = payload.header === undefined && typeof payload.action === "object" && payload.action !== null;
  if (!press && payload.type !== "url_verification") return null;
  checkFreshness(timestamp, now, LARK_CARD_MAX_AGE_SECONDS, "X-Lark-Request-Timestamp");
  return { payload, plain, signedAt: Number(timestamp) };
}

/**
 * The press as a v2 callback's (`open_id`, `user_id` as its operator; `open_message_id`, `open_chat_id` as its
 * context), timed by its signed timestamp: the legacy body has no time, nor an event id.
 */
export function normalizeLegacyCardAction(key: string, given: Record<string, unknown>, signedAt: number): NormalizedEvent {
  const p = withoutNulls(given);
  const text = (v: unknown) => (typeof v === "string" ? v : undefined);
  const event = {
    operator: { open_id: text(p.open_id), user_id: text(p.user_id), union_id: text(p.union_id) },
    action: p.action,
    context: { open_message_id: text(p.open_message_id), open_chat_id: text(p.open_chat_id) },
  };
  const normalized = normalizeCardAction(key, event, { tenant_key: p.tenant_key ?? null });
  const eventTime = platformTime(signedAt * 1000);
  const data = normalized.eventType === null ? normalized.data : { ...normalized.data, lark_event_id: null };
  return { ...normalized, sourceEventType: LEGACY_CARD_ACTION, eventTime, data };
}
