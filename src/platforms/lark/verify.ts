/**
 * Lark/Feishu event subscription security. With an encrypt key the body is
 * `{"encrypt": base64}`: AES-256-CBC, key SHA-256(encrypt key), IV the first
 * 16 bytes, PKCS#7 padding; and requests are signed: `X-Lark-Signature` is
 * hex SHA-256(timestamp + nonce + encrypt key + raw body). The payload's
 * verification token is checked in every mode.
 */
import { base64ToBytes } from "../../lib/base64";
import { constantTimeEqual, sha256Hex, secretsEqual } from "../../lib/crypto";
import { asRecord } from "../http";
import { checkFreshness, namedId, notThisBot, refused } from "../verify";

/**
 * Lark retries a delivery for about seven hours (15 s, 5 min, 1 h, 6 h); a
 * signed request older than this is a replay. Shorter than the shortest
 * retention (a day), so a replay is refused either as a duplicate or as stale.
 */
export const LARK_MAX_AGE_SECONDS = 12 * 60 * 60;

const encoder = new TextEncoder();

export async function decryptLarkBody(encryptKey: string, encrypted: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", await crypto.subtle.digest("SHA-256", encoder.encode(encryptKey)), { name: "AES-CBC" }, false, ["decrypt"]);
  const bytes = base64ToBytes(encrypted);
  if (bytes.length < 32 || bytes.length % 16 !== 0) throw new Error("ciphertext has the wrong length");
  const plain = await crypto.subtle.decrypt({ name: "AES-CBC", iv: bytes.subarray(0, 16) }, key, bytes.subarray(16));
  return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(plain);
}

export async function larkSignature(timestamp: string, nonce: string, encryptKey: string, rawBody: string): Promise<string> {
  return sha256Hex(timestamp + nonce + encryptKey + rawBody);
}

export interface LarkSecrets {
  verification_token: string;
  encrypt_key?: string;
}

/** The verified, decrypted payload; throws a 401 HostError for anything else. */
export async function openLarkRequest(headers: Headers, rawBody: string, secrets: LarkSecrets, now: number): Promise<Record<string, unknown>> {
  // The token is inside the body: one that is not JSON proves nothing and is refused like any unverifiable request.
  let body: Record<string, unknown>;
  try {
    body = asRecord(JSON.parse(rawBody));
  } catch {
    throw refused("the body is not JSON");
  }
  let payload = body;
  if (secrets.encrypt_key) {
    if (typeof body.encrypt !== "string") throw refused("an encrypt key is set but the body is not encrypted");
    const timestamp = headers.get("x-lark-request-timestamp");
    const nonce = headers.get("x-lark-request-nonce");
    const signature = headers.get("x-lark-signature");
    const signed = Boolean(timestamp && nonce && signature);
    if (signed && !constantTimeEqual(signature!, await larkSignature(timestamp!, nonce!, secrets.encrypt_key, rawBody))) throw refused("bad X-Lark-Signature");
    if (signed) checkFreshness(timestamp!, now, LARK_MAX_AGE_SECONDS, "X-Lark-Request-Timestamp");
    try {
      payload = asRecord(JSON.parse(await decryptLarkBody(secrets.encrypt_key, body.encrypt)));
    } catch {
      throw refused("the body does not decrypt with the encrypt key");
    }
    // Lark signs event deliveries; only the URL challenge may come unsigned (its token is checked below).
    if (!signed && payload.type !== "url_verification") throw refused("missing X-Lark-Signature");
  } else if (typeof body.encrypt === "string") {
    throw refused("the body is encrypted but no encrypt key is registered");
  }
  const token = asRecord(payload.header).token ?? payload.token;
  if (!(await secretsEqual(typeof token === "string" ? token : null, secrets.verification_token))) throw refused("bad verification token");
  return payload;
}

/**
 * A verified event must be for the bot's own app: its `header.app_id` (schema 2.0, card callbacks too), or its
 * `event.app_id` (schema 1.0). A verification token (and encrypt key) is one app's, so only a token shared by mistake
 * (the same one registered for two apps) lets another app's event reach here; that app's event would otherwise run
 * under this bot's app and be answered with its credentials. A payload naming no app (the URL challenge, a legacy card
 * press) is taken: one Lark signed for another app names it. An app is one tenant's here (its tenant token is
 * `tenant_access_token/internal`, a custom app's), so the tenant is not compared: an app registered twice is one bot
 * twice over, the same app answering in the same tenant.
 */
export function checkLarkApp(payload: Record<string, unknown>, appId: string): void {
  const named = asRecord(payload.header).app_id ?? asRecord(payload.event).app_id;
  if (typeof named === "string" && named !== "" && named !== appId) throw notThisBot(`the event is for Lark app ${namedId(named)}, not this bot's (${appId})`);
}
