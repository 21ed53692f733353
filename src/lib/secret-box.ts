import { base64ToBytes, bytesToBase64 } from "./base64";
import { keyedDigests } from "./keyed-digest";

/** Marks a stored value as sealed, and with which scheme: v3 binds it to its slot and destination. */
const SEALED = "sealed:v3:";
/** Earlier schemes, still opened and resealed as v3 by `POST /v1/admin/secrets/reseal`: v2 bound to the slot alone, v1 to nothing. */
const SEALED_SLOT_ONLY = "sealed:v2:";
const SEALED_UNBOUND = "sealed:v1:";
const SCHEMES = [SEALED, SEALED_SLOT_ONLY, SEALED_UNBOUND] as const;
const IV_BYTES = 12;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A stored secret the host cannot open: no key, or not the key it was sealed with. */
export class SealedSecretError extends Error {
  override readonly name = "SealedSecretError";
}

/** The tables holding credentials, one sealed column each. */
export type SealedTable = "runner_services" | "bots" | "models" | "knowledge_bases" | "tools" | "mcp_servers" | "agents";

/**
 * Where a sealed value belongs: its table, its row's id, in a record of
 * values (bot credentials, headers) its name, and where the row sends it
 * (its endpoint). It is the value's AES-GCM associated data, so a value
 * copied to another row or name, or left in a row whose endpoint was
 * changed, by someone who can write the database but not read SECRETS_KEY,
 * no longer opens and is never sent to an endpoint they chose.
 */
export interface SecretSlot {
  table: SealedTable;
  id: string;
  name?: string;
  destination: string;
}

/** The associated data of each scheme: v3 all of the slot, v2 its place without the destination, v1 none. */
const slotData = (scheme: (typeof SCHEMES)[number], slot: SecretSlot): Uint8Array | undefined =>
  scheme === SEALED
    ? encoder.encode(JSON.stringify([slot.table, slot.id, slot.name ?? null, slot.destination]))
    : scheme === SEALED_SLOT_ONLY
      ? encoder.encode(JSON.stringify([slot.table, slot.id, slot.name ?? null]))
      : undefined;

/**
 * Credentials at rest: what the host stores for others (runner HMAC secrets,
 * bot credentials, provider keys, tool and MCP headers) is sealed with
 * AES-256-GCM under SECRETS_KEY where it enters, and opened where it is used,
 * so a copy of the database holds no usable credential.
 */
export interface SecretBox {
  /** The value to store: sealed when the box has a key, as given otherwise. */
  seal<T extends string | null>(plain: T, slot: SecretSlot): Promise<T>;
  /** The value as it was given: opened when sealed for this slot; a value stored before a key was set is returned as it is. */
  open<T extends string | null>(stored: T, slot: SecretSlot): Promise<T>;
  /** The value sealed under the current key for its slot, or undefined when it already is (or is null): nothing to write. */
  reseal(stored: string | null, slot: SecretSlot): Promise<string | undefined>;
  /** Keyed digests of `value` for `purpose` (./keyed-digest.ts): the one to store first, then those it may be stored under. */
  digests(value: string, purpose: string): Promise<string[]>;
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

/**
 * Seals under `keyBase64`; opens under it or, while keys are being rotated,
 * under `previousKeyBase64` (a GCM tag that does not verify tells the keys apart).
 */
export function secretBox(keyBase64: string | undefined, previousKeyBase64?: string): SecretBox {
  const openUnder = async (key: string, bytes: Uint8Array, additionalData: Uint8Array | undefined) =>
    decoder.decode(
      await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: bytes.subarray(0, IV_BYTES), ...(additionalData && { additionalData }) },
        await importKey(key),
        bytes.subarray(IV_BYTES),
      ),
    );
  return {
    async seal(plain, slot) {
      if (plain === null || !keyBase64) return plain;
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: slotData(SEALED, slot) }, await importKey(keyBase64), encoder.encode(plain)));
      const out = new Uint8Array(IV_BYTES + sealed.length);
      out.set(iv);
      out.set(sealed, IV_BYTES);
      // The type parameter is string here (null returned above): the sealed text is a string like the input.
      return `${SEALED}${bytesToBase64(out)}` as typeof plain;
    },
    async open(stored, slot) {
      if (stored === null) return stored;
      const scheme = SCHEMES.find((prefix) => stored.startsWith(prefix));
      if (!scheme) return stored;
      if (!keyBase64) throw new SealedSecretError("a stored secret is sealed and SECRETS_KEY is not set");
      let bytes: Uint8Array;
      try {
        bytes = base64ToBytes(stored.slice(scheme.length));
      } catch (err) {
        throw new SealedSecretError("a stored secret is damaged", { cause: err });
      }
      const additionalData = slotData(scheme, slot);
      // As in seal: a string in, a string out.
      for (const key of previousKeyBase64 ? [keyBase64, previousKeyBase64] : [keyBase64]) {
        try {
          return (await openUnder(key, bytes, additionalData)) as typeof stored;
        } catch {
          // Not this key (or damaged, or sealed for another slot or destination): try the next.
        }
      }
      throw new SealedSecretError(
        `a stored secret of ${slot.table} cannot be opened: it was sealed under neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS, or sealed for another row or name, or its row's endpoint was changed without the admin API, or it is damaged`,
      );
    },
    async reseal(stored, slot) {
      if (stored === null) return undefined;
      if (!keyBase64) throw new SealedSecretError("SECRETS_KEY is not set: there is no key to seal under");
      if (stored.startsWith(SEALED) && (await secretBox(keyBase64).open(stored, slot).then(() => true, () => false))) return undefined;
      return this.seal(await this.open(stored, slot), slot);
    },
    digests: (value, purpose) => keyedDigests(value, purpose, keyBase64, previousKeyBase64),
  };
}

/** Whether a stored value is sealed (under any scheme): what a view must never show. */
export const isSealed = (value: unknown): boolean => typeof value === "string" && SCHEMES.some((prefix) => value.startsWith(prefix));

/** The slot of a record's value: the record's own slot, named. */
type RecordSlot = Omit<SecretSlot, "name">;

/** A record of credentials or header values with each string value sealed; its keys stay readable (views list them). */
export async function sealValues<T extends Record<string, unknown>>(box: SecretBox, record: T, slot: RecordSlot): Promise<T> {
  return Object.fromEntries(await Promise.all(Object.entries(record).map(async ([k, v]) => [k, typeof v === "string" ? await box.seal(v, { ...slot, name: k }) : v]))) as T;
}

/** The record as it was given to sealValues. */
export async function openValues<T extends Record<string, unknown>>(box: SecretBox, record: T, slot: RecordSlot): Promise<T> {
  return Object.fromEntries(await Promise.all(Object.entries(record).map(async ([k, v]) => [k, typeof v === "string" ? await box.open(v, { ...slot, name: k }) : v]))) as T;
}

/** The record with every string value sealed under the current key, or undefined when all already are. */
export async function resealValues<T extends Record<string, unknown>>(box: SecretBox, record: T, slot: RecordSlot): Promise<T | undefined> {
  let changed = false;
  const entries = await Promise.all(
    Object.entries(record).map(async ([k, v]) => {
      const resealed = typeof v === "string" ? await box.reseal(v, { ...slot, name: k }) : undefined;
      if (resealed !== undefined) changed = true;
      return [k, resealed ?? v];
    }),
  );
  return changed ? (Object.fromEntries(entries) as T) : undefined;
}

/**
 * A value sealed for `from`, sealed again for `to`: its row now sends it
 * elsewhere, changed through the admin API. As it is when nothing changed.
 */
export async function moveSealed<T extends string | null>(box: SecretBox, stored: T, from: SecretSlot, to: SecretSlot): Promise<T> {
  if (stored === null || from.destination === to.destination) return stored;
  return box.seal(await box.open(stored, from), to);
}

/** A record of values sealed for `from`, each sealed again for `to` (see `moveSealed`). */
export async function moveSealedValues<T extends Record<string, unknown>>(box: SecretBox, record: T, from: RecordSlot, to: RecordSlot): Promise<T> {
  if (from.destination === to.destination) return record;
  return sealValues(box, await openValues(box, record, from), to);
}
