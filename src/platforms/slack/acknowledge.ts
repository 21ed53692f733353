/**
 * What a Slack user sees at once. Slack wants a 2xx within 3 s. An event's, a press's and a shortcut's is empty: a
 * body to an interactivity request would be read as its answer (a modal's response_action). A slash command's body is
 * shown: `{"response_type":"in_channel"}` shows the command the user typed to the channel, above the answer to come
 * (as Discord shows a command's use); one that starts no answer gets a notice only the user sees. A press or shortcut
 * that starts no answer hears the same notice by its response_url, after the acknowledgement.
 */
import { loggedId } from "../../lib/log-text";
import { pressNotice } from "../press-notice";
import type { Bot, Recorded } from "../types";
import type { SlackCredentials } from "./api";
import { postToResponseUrl, trustedResponseUrl } from "./response-url";

/** Interactions whose user is told by their response_url when nothing will answer them. */
const NOTICED_BY_URL = new Set(["block_actions", "message_action"]);

export function acknowledgeSlack(recorded: Recorded[]): unknown {
  const r = recorded[0];
  if (r?.event.sourceEventType !== "slash_command") return null;
  const said = pressNotice(r);
  return said === null ? { response_type: "in_channel" } : { response_type: "ephemeral", text: said };
}

/** The user's private notice for a press or shortcut that starts no answer. Best effort; a paused bot calls nothing. */
export function noticeByResponseUrl(bot: Bot<SlackCredentials>, recorded: Recorded[], timeoutMs: number): Promise<void> | null {
  const r = recorded[0];
  if (!r || !bot.enabled || !NOTICED_BY_URL.has(r.event.sourceEventType)) return null;
  const target = r.event.replyTarget;
  const url = target?.platform === "slack" ? trustedResponseUrl(target.responseUrl, bot.apiBaseUrl) : null;
  const said = pressNotice(r);
  if (url === null || said === null) return null;
  return postToResponseUrl(url, { response_type: "ephemeral", text: said }, timeoutMs).then(
    (res) => {
      if (!res.ok) console.warn(`slack bot ${loggedId(bot.botId)}: notice for ${r.event.sourceEventType} not posted (${loggedId(res.failure.code)})`);
    },
    () => console.warn(`slack bot ${loggedId(bot.botId)}: notice for ${r.event.sourceEventType} not posted`),
  );
}
