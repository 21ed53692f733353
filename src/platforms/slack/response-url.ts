/**
 * A slash command's, shortcut's or press's `response_url`: it posts in the chat where the user asked for 30 minutes, at
 * most five times, with no token, even where the bot is no member (a channel it was never invited to, a DM between
 * people). So it is a credential: never stored, logged or put in an error message (callPlatform never names a URL).
 */
import { asRecord, callPlatform, failureOfStatus, requestInit, retryAfterHeaderMs } from "../http";
import { scrubSecrets } from "../redact";
import type { ApiResult } from "../types";

/** Slack takes at most five posts by one response_url (within its 30 minutes); past them it answers `used_url`. */
export const RESPONSE_URL_MAX_POSTS = 5;

/** A post the URL would refuse (its five spent), not made: refused here as Slack would, without the round trip. */
export const responseUrlSpent = (): ApiResult<never> => ({
  ok: false,
  failure: { kind: "permanent", status: null, code: "slack_response_url_spent", message: `a response_url takes at most ${RESPONSE_URL_MAX_POSTS} posts` },
});

/** Slack's hosts for it (GovSlack's too). */
const SLACK_HOOK_HOSTS = new Set(["hooks.slack.com", "hooks.slack-gov.com"]);

/**
 * The URL, when it is Slack's own (or the bot's configured API origin: a proxy, a fake platform in tests): a payload
 * naming another address gets no answer sent there. Null otherwise.
 */
export function trustedResponseUrl(url: string | undefined, apiBaseUrl: string): string | null {
  if (!url) return null;
  try {
    const u = new URL(url);
    const trusted = (u.protocol === "https:" && SLACK_HOOK_HOSTS.has(u.hostname)) || u.origin === new URL(apiBaseUrl).origin;
    return trusted ? url : null;
  } catch {
    return null;
  }
}

/**
 * A message by the response_url: `in_channel` for everyone in the chat, `ephemeral` for the user alone. Never in place
 * of the message pressed on (`replace_original: false`). Slack answers `ok`, or an error such as `expired_url` or
 * `used_url` (its five posts spent).
 */
export async function postToResponseUrl(url: string, message: { response_type: "in_channel" | "ephemeral"; text: string }, timeoutMs: number): Promise<ApiResult<void>> {
  const reply = await callPlatform(url, requestInit("POST", { ...message, replace_original: false }), timeoutMs);
  if (!reply.ok) return reply;
  const { status, headers, json } = reply.value;
  const body = asRecord(json);
  if (status >= 200 && status < 300 && body.ok !== false) return { ok: true, value: undefined };
  // Slack's words, should they ever quote the address they were sent to, without it.
  const error = typeof body.error === "string" ? scrubSecrets(body.error, { response_url: url }) : `http_${status}`;
  if (status >= 200 && status < 300) return { ok: false, failure: { kind: "permanent", status, code: `slack_response_url_${error}`, message: error } };
  return { ok: false, failure: failureOfStatus(status, `slack_response_url_http_${status}`, error, retryAfterHeaderMs(headers)) };
}
