import type { RunJob } from "../src/run/job";

/**
 * The order in which the user sent a chat's messages, as their platform gives it: Telegram numbers a chat's messages
 * (`message_id`), Slack stamps each with its channel's `ts`, Discord's interaction ids are snowflakes (time first), and
 * Lark's events carry their creation time (`header.create_time`, in ms, as `event_time`). Arrival at the conversation
 * is another order: a message whose files are slow to download is handed over after one sent later. An API event has
 * no such order.
 */
type SentKey = readonly bigint[];

/** The number Telegram gave the event's message (a chat numbers its messages in the order they were sent), or null. */
export const telegramMessageIdOf = (job: RunJob): number | null =>
  job.event.source === "telegram" && Number.isSafeInteger(job.event.data.message_id) ? (job.event.data.message_id as number) : null;

function sentKeyOf(job: RunJob): SentKey | null {
  const { source, data, event_time } = job.event;
  if (source === "telegram") {
    const id = telegramMessageIdOf(job);
    return id === null ? null : [BigInt(id)];
  }
  if (source === "slack") {
    // "1700000000.000200": seconds, then a fraction compared as one (padded to one width).
    const ts = typeof data.ts === "string" ? /^(\d{1,20})\.(\d{1,9})$/.exec(data.ts) : null;
    return ts ? [BigInt(ts[1]), BigInt(ts[2].padEnd(9, "0"))] : null;
  }
  if (source === "discord") return typeof data.interaction_id === "string" && /^\d{1,20}$/.test(data.interaction_id) ? [BigInt(data.interaction_id)] : null;
  if (source === "lark") {
    const at = typeof event_time === "string" ? Date.parse(event_time) : Number.NaN;
    return Number.isFinite(at) ? [BigInt(at)] : null;
  }
  return null;
}

/** Whether `a`'s message was sent before `b`'s, by their platform's order (false when either has none, or they tie). */
export function sentBefore(a: RunJob, b: RunJob): boolean {
  const [x, y] = [sentKeyOf(a), sentKeyOf(b)];
  if (x === null || y === null || a.event.source !== b.event.source) return false;
  // A supergroup continuing its group's conversation numbers its messages anew (src/platforms/moved-chats.ts).
  if (a.event.data.chat_id !== b.event.data.chat_id) return false;
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] < y[i];
  return false;
}
