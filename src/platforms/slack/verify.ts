import { constantTimeEqual, hmacSha256Hex } from "../../lib/crypto";
import { checkFreshness, refused } from "../verify";

/** Slack refuses requests older than this, and so do we (replays of a captured request). */
export const SLACK_MAX_AGE_SECONDS = 5 * 60;

/**
 * Slack's request signing: `X-Slack-Signature` is `v0=` + hex
 * HMAC-SHA256(signing secret, `v0:{X-Slack-Request-Timestamp}:{raw body}`),
 * and the timestamp is at most five minutes away from now.
 */
export async function verifySlackSignature(headers: Headers, rawBody: string, signingSecret: string, now: number): Promise<void> {
  const timestamp = headers.get("x-slack-request-timestamp");
  const signature = headers.get("x-slack-signature");
  if (!timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) throw refused("missing X-Slack-Request-Timestamp or X-Slack-Signature");
  checkFreshness(timestamp, now, SLACK_MAX_AGE_SECONDS, "X-Slack-Request-Timestamp");
  const expected = `v0=${await hmacSha256Hex(signingSecret, `v0:${timestamp}:${rawBody}`)}`;
  if (!constantTimeEqual(signature, expected)) throw refused("bad X-Slack-Signature");
}
