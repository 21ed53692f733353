import { loggedId } from "../lib/log-text";

/** The line's own name, its first field: what a log query (or a test) picks the lines out by. */
export const WEBHOOK_REFUSED = "webhook.refused";

/** A webhook refusal an operator may have to fix: how it was answered, and why. */
export interface WebhookRefusal {
  status: number;
  code: string;
  /**
   * The answer's message, as the bot's admin view notes it: written by the host, with what the request or a platform
   * said in it (an id, auth.test's words) already escaped and cut where it was put in (namedId, loggedText), and never
   * a secret. Escaping it again would double those escapes, and the log would no longer read as the view.
   */
  reason: string;
}

/** The refusal as one JSON line: its name, its HTTP status, the bot it was sent to, its code and its reason. */
export function webhookRefusedLine(bot: { platform: string; botId: string }, refusal: WebhookRefusal): string {
  return JSON.stringify({
    log: WEBHOOK_REFUSED,
    // Second, as every line's status-like field: a reader tells the answer by the line's start.
    status: refusal.status,
    platform: bot.platform,
    bot_id: loggedId(bot.botId),
    code: refusal.code,
    reason: refusal.reason,
  });
}

/**
 * One line per refusal noted on a bot (bad signature or secret, another installation's request, an installation
 * Slack did not name, credentials that cannot be opened), for an operator alerting on them (Workers Logs / Logpush
 * index it). A warning, as the text line it replaces was.
 */
export function logWebhookRefused(bot: { platform: string; botId: string }, refusal: WebhookRefusal): void {
  console.warn(webhookRefusedLine(bot, refusal));
}
