import { loggedId, loggedText } from "../lib/log-text";

/** The line's own name, its first field: what a log query (or a test) picks the lines out by. */
export const DELIVERY_FAILED = "delivery.failed";

const textOf = (v: unknown) => (typeof v === "string" || typeof v === "number" ? String(v) : null);
const countOf = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);
/** An id as every log line names it (a platform's chat or message id may be anything): escaped and cut. */
const idOf = (v: unknown) => {
  const text = textOf(v);
  return text === null ? null : loggedId(text);
};

/**
 * A reply (or part or file of one) given up on as one JSON line, from its trail's `delivery.failed` record (already
 * scrubbed of the bot's credentials, attemptFacts) and its conversation: which run and bot, the platform's code and
 * words, its HTTP status, what was not delivered (the call, which reply, transcript item, part or file, its size) and
 * after how many attempts. Never the reply's text: its length only. Every field is always there (null when unknown),
 * so a log query reads one shape.
 */
export function deliveryFailedLine(runId: string, d: Record<string, unknown>): string {
  const code = textOf(d.code);
  const error = textOf(d.error);
  return JSON.stringify({
    log: DELIVERY_FAILED,
    run_id: runId,
    platform: textOf(d.platform),
    bot_id: idOf(d.bot_id),
    // The platform's code (Slack's own error name) and words are the platform's: escaped and cut as every log line
    // has them (the trail and the bot's note keep them whole).
    code: code === null ? null : loggedText(code, 100),
    reason: error === null ? null : loggedText(error),
    status: countOf(d.status),
    operation: textOf(d.operation),
    conversation_id: idOf(d.conversation_id),
    event_id: idOf(d.event_id),
    reply: countOf(d.reply),
    item: countOf(d.item),
    part: countOf(d.part),
    message_id: idOf(d.message_id),
    artifact_id: idOf(d.artifact_id),
    chars: countOf(d.chars),
    bytes: countOf(d.bytes),
    attempts: countOf(d.attempt),
  });
}

/**
 * One line per reply (or part or file of one) given up on, for an operator alerting on replies that never came
 * (Workers Logs / Logpush index it). A warning, as the text line it replaces was.
 */
export function logDeliveryFailed(runId: string, d: Record<string, unknown>): void {
  console.warn(deliveryFailedLine(runId, d));
}
