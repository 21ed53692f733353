const encoder = new TextEncoder();

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

export function toHex(bytes: ArrayBuffer | Uint8Array): string {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let out = "";
  for (const b of view) out += HEX[b];
  return out;
}

export function randomHex(bytes: number): string {
  return toHex(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** A bearer secret: 32 random bytes, base64url. */
export function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export async function sha256Hex(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === "string" ? encoder.encode(data) : data;
  return toHex(await crypto.subtle.digest("SHA-256", bytes));
}

export async function hmacSha256Hex(secret: string, data: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return toHex(await crypto.subtle.sign("HMAC", key, encoder.encode(data)));
}

/**
 * Compares two strings in time that depends only on their length. Callers
 * compare fixed-length digests, so the length itself reveals nothing.
 */
export function constantTimeEqual(a: string, b: string): boolean {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  let diff = x.length ^ y.length;
  const n = Math.max(x.length, y.length);
  for (let i = 0; i < n; i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

/** Digests of expected secrets (config values: few and long-lived), so a check hashes only what was presented. */
const expectedDigests = new Map<string, Promise<string>>();
const EXPECTED_DIGESTS_CAP = 64;

/**
 * Whether a presented secret equals the expected one, in constant time
 * whatever their lengths: their SHA-256 digests are compared.
 */
export async function secretsEqual(given: string | null | undefined, expected: string): Promise<boolean> {
  if (given == null) return false;
  let digest = expectedDigests.get(expected);
  if (!digest) {
    if (expectedDigests.size >= EXPECTED_DIGESTS_CAP) expectedDigests.clear();
    digest = sha256Hex(expected);
    expectedDigests.set(expected, digest);
  }
  return constantTimeEqual(await sha256Hex(given), await digest);
}
