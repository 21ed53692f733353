import { base64ToBytes, bytesToBase64 } from "./base64";

/** Marks a stored value as sealed, and with which scheme. */
const SEALED = "sealed:v1:";
const IV_BYTES = 12;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A stored secret the host cannot open: no key, or not the key it was sealed with. */
export class SealedSecretError extends Error {
  override readonly name = "SealedSecretError";
}

/**
 * Credentials at rest: what the host stores for others (runner HMAC secrets,
 * bot credentials, provider keys, tool and MCP headers) is sealed with
 * AES-256-GCM under SECRETS_KEY where it enters, and opened where it is used,
 * so a copy of the database holds no usable credential.
 */
export interface SecretBox {
  /** The value to store: sealed when the box has a key, as given otherwise. */
  seal<T extends string | null>(plain: T): Promise<T>;
  /** The value as it was given: opened when sealed; a value stored before a key was set is returned as it is. */
  open<T extends string | null>(stored: T): Promise<T>;
}

/** Imported keys, by their base64 (one per deployment in practice). */
const keys = new Map<string, Promise<CryptoKey>>();

function importKey(keyBase64: string): Promise<CryptoKey> {
  let key = keys.get(keyBase64);
  if (!key) {
    key = crypto.subtle.importKey("raw", base64ToBytes(keyBase64), "AES-GCM", false, ["encrypt", "decrypt"]);
    keys.set(keyBase64, key);
  }
  return key;
}

/** Whether `keyBase64` is a usable SECRETS_KEY: 32 bytes, base64. */
export function isSecretsKey(keyBase64: string): boolean {
  try {
    return base64ToBytes(keyBase64).length === 32;
  } catch {
    return false;
  }
}

export function secretBox(keyBase64: string | undefined): SecretBox {
  return {
    async seal(plain) {
      if (plain === null || !keyBase64) return plain;
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, await importKey(keyBase64), encoder.encode(plain)));
      const out = new Uint8Array(IV_BYTES + sealed.length);
      out.set(iv);
      out.set(sealed, IV_BYTES);
      // The type parameter is string here (null returned above): the sealed text is a string like the input.
      return `${SEALED}${bytesToBase64(out)}` as typeof plain;
    },
    async open(stored) {
      if (stored === null || !stored.startsWith(SEALED)) return stored;
      if (!keyBase64) throw new SealedSecretError("a stored secret is sealed and SECRETS_KEY is not set");
      try {
        const bytes = base64ToBytes(stored.slice(SEALED.length));
        const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: bytes.subarray(0, IV_BYTES) }, await importKey(keyBase64), bytes.subarray(IV_BYTES));
        // As in seal: a string in, a string out.
        return decoder.decode(plain) as typeof stored;
      } catch (err) {
        throw new SealedSecretError("a stored secret cannot be opened: it is damaged, or SECRETS_KEY is not the key it was sealed with", { cause: err });
      }
    },
  };
}

/** A record of credentials or header values with each string value sealed; its keys stay readable (views list them). */
export async function sealValues<T extends Record<string, unknown>>(box: SecretBox, record: T): Promise<T> {
  return Object.fromEntries(await Promise.all(Object.entries(record).map(async ([k, v]) => [k, typeof v === "string" ? await box.seal(v) : v]))) as T;
}

/** The record as it was given to sealValues. */
export async function openValues<T extends Record<string, unknown>>(box: SecretBox, record: T): Promise<T> {
  return Object.fromEntries(await Promise.all(Object.entries(record).map(async ([k, v]) => [k, typeof v === "string" ? await box.open(v) : v]))) as T;
}
