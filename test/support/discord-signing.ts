import { generateKeyPairSync, sign, type KeyObject } from "node:crypto";

/** An application's Ed25519 key pair, its public key in hex as Discord's Developer Portal shows it. */
export function discordKeyPair(): { privateKey: KeyObject; publicKeyHex: string } {
  const pair = generateKeyPairSync("ed25519");
  return { privateKey: pair.privateKey, publicKeyHex: pair.publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("hex") };
}

/** The headers Discord signs an interaction's body with (`at`: when it says it sent it). */
export function discordSignature(body: string, key: KeyObject, at = Date.now()): Record<string, string> {
  const timestamp = String(Math.floor(at / 1000));
  return { "x-signature-timestamp": timestamp, "x-signature-ed25519": sign(null, Buffer.from(timestamp + body), key).toString("hex") };
}

/** An interaction posted to a bot's webhook as Discord posts it, signed: the answer's status and JSON body. */
export async function postInteraction(webhookUrl: string, key: KeyObject, interaction: unknown): Promise<{ status: number; body: any }> {
  const body = JSON.stringify(interaction);
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", ...discordSignature(body, key) }, body });
  return { status: res.status, body: await res.json() };
}
