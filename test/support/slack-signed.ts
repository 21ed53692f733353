/**
 * Requests as Slack sends them to a bot's webhook: signed with the app's signing secret (`v0=` and the hex
 * HMAC-SHA256 of `v0:{timestamp}:{body}`), timestamped now.
 */
import { createHmac } from "node:crypto";

export const slackSignature = (secret: string, timestamp: number | string, body: string) => `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;

/** The headers of `body` signed now with `secret`. */
export function slackSignedHeaders(secret: string, body: string, contentType = "application/json"): Record<string, string> {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return { "content-type": contentType, "x-slack-request-timestamp": timestamp, "x-slack-signature": slackSignature(secret, timestamp, body) };
}

export interface SlackAnswer {
  status: number;
  /** `X-Slack-No-Retry`, which a refusal Slack should not send again carries. */
  noRetry: string | null;
  /** Parsed when JSON; else as sent (an acknowledgement is empty). */
  // Each test reads the shape it expects of it, as host.admin's body.
  body: any;
  text: string;
}

/** POSTs `body`, signed now with `secret`, to bot `botId`'s webhook. */
export async function postToSlackBot(hostUrl: string, botId: string, body: string, opts: { secret: string; contentType?: string }): Promise<SlackAnswer> {
  const res = await fetch(`${hostUrl}/v1/webhooks/slack/${botId}`, { method: "POST", headers: slackSignedHeaders(opts.secret, body, opts.contentType), body });
  const text = await res.text();
  return { status: res.status, noRetry: res.headers.get("x-slack-no-retry"), body: text.startsWith("{") ? JSON.parse(text) : text, text };
}

/** The body of a webhook's 403 for a request signed for another installation or app. */
export const webhookRefusal = (why: string) => ({ error: { code: "forbidden", message: `webhook refused: ${why}` } });
