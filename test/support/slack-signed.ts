/**
 * Requests as Slack sends them to a bot's webhook: signed with the app's signing secret (`v0=` and the hex
 * HMAC-SHA256 of `v0:{timestamp}:{body}`), timestamped now.
 */
import { createHmac } from "node:crypto";
import { expect } from "vitest";
import type { FakeReply, PlatformCall } from "./fake-platform";
import type { TestHost } from "./host";

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

/**
 * A Slack Web API for bots of apps installed in several workspaces, as a fake platform's handler: `auth.test` says
 * what `installed` says of each token (unless `authTest` answers first: a failure to simulate), any other token is
 * `invalid_auth`, posts (public and ephemeral) are taken, and so is a press's response_url sent without a token.
 */
export function slackInstallationsApi(installed: Record<string, Record<string, unknown>>, authTest?: (token: string) => FakeReply | undefined) {
  let posts = 1_800_000_000;
  return (call: PlatformCall): FakeReply => {
    // A press's response_url (the fake's /response/…): Slack takes it without a token, and refuses one that has one.
    if (call.path.startsWith("/response/")) return call.headers.authorization ? { status: 400, json: {} } : { json: { ok: true } };
    const token = String(call.headers.authorization ?? "").replace(/^Bearer /, "");
    if (!installed[token]) return { json: { ok: false, error: "invalid_auth" } };
    if (call.path === "/auth.test") return authTest?.(token) ?? { json: { ok: true, url: "https://example.slack.com/", team: "Example", user: "agent", is_enterprise_install: false, ...installed[token] } };
    if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${++posts}.000100` } };
    if (call.path === "/chat.postEphemeral") return { json: { ok: true, message_ts: `${++posts}.000100` } };
    return { status: 404, json: { ok: false, error: "unknown_method" } };
  };
}

/** A bot's installation write (src/stores/bot-installation.ts `pin`), as the Worker sends it to the database: for drills. */
export const INSTALLATION_WRITE = 'set \\"installation_json\\" = ?, \\"installation_key\\" = ?';

/** The body of `POST /v1/admin/bots` for a Slack bot of one installation, its API at `apiBaseUrl`. */
export const slackBotCreated = (botId: string, token: string, secret: string, apiBaseUrl: string) => ({
  bot_id: botId,
  platform: "slack",
  workspace_id: `ws-${botId}`,
  api_base_url: apiBaseUrl,
  credentials: { bot_token: token, signing_secret: secret },
});

/** Registers each of `bots` ([bot id, bot token, signing secret]) with its API at `apiBaseUrl`, each bound to an agent of its own on `runner`. */
export async function registerSlackBots(host: TestHost, runner: { url: string; runnerId(): string }, apiBaseUrl: string, bots: [string, string, string][]) {
  for (const [botId, token, secret] of bots) {
    expect((await host.admin("POST", "/v1/admin/bots", slackBotCreated(botId, token, secret, apiBaseUrl))).status).toBe(201);
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `agent-${botId}`, scope: { type: "bot", id: botId } });
  }
}
