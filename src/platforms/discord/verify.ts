import { asRecord } from "../http";
import { checkFreshness, namedId, notThisBot, refused } from "../verify";

/** Discord calls at once and never retries an interaction, so a request older than this is a replay. */
export const DISCORD_MAX_AGE_SECONDS = 5 * 60;

const encoder = new TextEncoder();

export function hexToBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/**
 * Discord interactions: `X-Signature-Ed25519` is the Ed25519 signature of
 * `X-Signature-Timestamp` + raw body under the application's public key, and
 * the timestamp is recent.
 */
export async function verifyDiscordSignature(headers: Headers, rawBody: string, publicKeyHex: string, now: number): Promise<void> {
  const signature = headers.get("x-signature-ed25519");
  const timestamp = headers.get("x-signature-timestamp");
  if (!signature || !timestamp || !/^[0-9a-f]{128}$/i.test(signature)) throw refused("missing or malformed X-Signature-Ed25519 / X-Signature-Timestamp");
  const algorithm = { name: "Ed25519" };
  const key = await crypto.subtle.importKey("raw", hexToBytes(publicKeyHex), algorithm, false, ["verify"]);
  const valid = await crypto.subtle.verify(algorithm, key, hexToBytes(signature), encoder.encode(timestamp + rawBody));
  if (!valid) throw refused("bad X-Signature-Ed25519");
  checkFreshness(timestamp, now, DISCORD_MAX_AGE_SECONDS, "X-Signature-Timestamp");
}

/**
 * A verified interaction must be for the bot's own application (`application_id`, which Discord sends with each, PING
 * included). A public key is one application's, so only a key registered for two bots by mistake lets another
 * application's interaction reach here: it would run as this bot's, answered with this bot's token. One application
 * registered as two bots is one bot twice over (Discord calls one Interactions Endpoint URL per application, its
 * interaction token answers for that application alone): not told apart here.
 */
export function checkDiscordApplication(body: unknown, applicationId: string): void {
  const named = asRecord(body).application_id;
  if (typeof named === "string" && named !== "" && named !== applicationId) throw notThisBot(`the interaction is for Discord application ${namedId(named)}, not this bot's (${applicationId})`);
}
