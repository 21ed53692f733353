import { hmacSha256Hex } from "../lib/crypto";

/** PROTOCOL §3: `X-Agent-Signature: v1={hex hmac_sha256(secret, "{timestamp}.{body}")}`. */
export async function signRunRequest(secret: string, timestamp: number, body: string): Promise<string> {
  return `v1=${await hmacSha256Hex(secret, `${timestamp}.${body}`)}`;
}
