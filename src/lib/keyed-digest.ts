/**
 * A digest of a secret that a lookup can match but a copy of the database cannot test guesses against: HMAC-SHA-256
 * under a key derived, for one purpose, from SECRETS_KEY (never the bare hash, and never the AES key itself).
 */
import { base64ToBytes } from "./base64";
import { toHex } from "./crypto";

const encoder = new TextEncoder();

/** Derived keys, by SECRETS_KEY and purpose (one or two per deployment in practice). */
const derived = new Map<string, Promise<CryptoKey>>();

const hmacKey = (raw: BufferSource) => crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);

/** HMAC(SECRETS_KEY, "digest:" + purpose) as its own key: a key for this purpose alone. */
function keyFor(keyBase64: string | null, purpose: string): Promise<CryptoKey> {
  const id = `${keyBase64 ?? ""} ${purpose}`;
  let key = derived.get(id);
  if (!key) {
    const label = encoder.encode(`agent-host digest:${purpose}`);
    // Without SECRETS_KEY the credentials are stored as given: the digest is keyed by its purpose alone, and hides
    // nothing the row beside it does not show.
    key = keyBase64 === null ? hmacKey(label) : hmacKey(base64ToBytes(keyBase64)).then(async (k) => hmacKey(await crypto.subtle.sign("HMAC", k, label)));
    derived.set(id, key);
  }
  return key;
}

/**
 * The digests `value` may be stored under: the current key's first (the one to store), then SECRETS_KEY_PREVIOUS's
 * (rows digested before a rotation, until their credentials are resealed) and the keyless one (rows digested before a
 * key was set, whose credentials are still stored as given).
 */
export async function keyedDigests(value: string, purpose: string, keyBase64: string | undefined, previousKeyBase64: string | undefined): Promise<string[]> {
  const keys = [...new Set([keyBase64, previousKeyBase64].filter((k): k is string => k !== undefined)), null];
  const data = encoder.encode(value);
  return Promise.all(keys.map(async (k) => toHex(await crypto.subtle.sign("HMAC", await keyFor(k, purpose), data))));
}
