/**
 * The answer to a press on an ephemeral message: seen by the presser alone, never posted in the channel. It goes by the
 * press's response_url as `ephemeral` (what Slack gives an interaction to answer with, even where the bot is no
 * member); once that is spent or expired (five posts, 30 minutes) or when there is none, by chat.postEphemeral to the
 * user in the channel (and thread). Slack edits no ephemeral message (chat.update refuses them; a response_url could
 * only replace the message pressed on), so no draft is streamed: each part is posted once, whole (index.ts surfaceAt).
 * No file either: Slack's upload shares a file with the whole channel.
 */
import type { ApiResult, Bot, DeliveryTarget, Messenger, TextFormat } from "../types";
import { slackCall, type SlackCredentials } from "./api";
import { slackText } from "./mrkdwn";
import { postToResponseUrl, trustedResponseUrl } from "./response-url";

type SlackTarget = Extract<DeliveryTarget, { platform: "slack" }>;

const refused = (code: string, message: string): ApiResult<never> => ({ ok: false, failure: { kind: "permanent", status: null, code, message } });

export function ephemeralMessenger(bot: Bot<SlackCredentials>, target: SlackTarget, timeoutMs: number, format: TextFormat): Messenger {
  let responseUrl = trustedResponseUrl(target.responseUrl, bot.apiBaseUrl);
  let posted = 0;
  async function byApi(text: string): Promise<ApiResult<string>> {
    if (!target.userId) return refused("slack_ephemeral_no_user", "no user to show the answer to");
    const params = { channel: target.channel, user: target.userId, text, ...(target.threadTs ? { thread_ts: target.threadTs } : {}) };
    const res = await slackCall(bot, "chat.postEphemeral", params, timeoutMs);
    return res.ok ? { ok: true, value: `ephemeral:${String(res.value.message_ts ?? ++posted)}` } : res;
  }
  return {
    async send(text) {
      const shown = slackText(text, format);
      if (responseUrl === null) return byApi(shown);
      const res = await postToResponseUrl(responseUrl, { response_type: "ephemeral", text: shown }, timeoutMs);
      if (res.ok) return { ok: true, value: `response_url:${++posted}` };
      // Spent, expired or refused for good: the rest goes by the API, still to the user alone. A transient failure is retried as it is.
      if (res.failure.kind !== "permanent" || res.failure.maybeApplied) return res;
      responseUrl = null;
      return byApi(shown);
    },
    async edit() {
      return refused("slack_ephemeral_no_edit", "Slack cannot edit a message only one user sees");
    },
    // Never reached by a reply's files: the target's 0 bytes (index.ts surfaceAt) refuses them before any call.
    async sendFile() {
      return refused("slack_ephemeral_no_files", "Slack cannot share a file with one user alone: its upload shows it to the whole channel");
    },
  };
}
