/**
 * A reply's message, read at ingress where the platform names it by id only (Lark's `parent_id`): its context in
 * `data.reply_to`, its files after the event's own. One that cannot be read in time, or at all, is said so as a file
 * left out is (`attachments_unavailable`), and in `reply_to.unavailable`: the event runs all the same. One the bot
 * received in this conversation is read as recorded, its files those stored then (./stored-reply.ts); one it delivered
 * itself, as its answer was recorded (./delivered-reply.ts).
 */
import type { Db } from "../db/client";
import { HostError } from "../lib/errors";
import { deliveredReply, withDeliveredReply } from "./delivered-reply";
import { readForEarlierReply } from "./earlier-read-reply";
import { scrubSecrets } from "./redact";
import { unreadReply } from "./reply-context";
import { storedReply } from "./stored-reply";
import { DECLINED, declinesUnaddressed, RECALLED, readIfLeftUnread } from "./unaddressed-read";
import type { Bot, NormalizedEvent, PlatformAdapter } from "./types";

/**
 * A recorded message read again for a reply (./unaddressed-read.ts: a forward left unread) takes no more of the
 * deadline than one never recorded is read in (lark/replied.ts): the replied message's files come in what is left
 * (the reply's own are fetched alongside the read: ./own-files-alongside.ts).
 */
const REREAD_TIMEOUT_MS = 1_000;

export async function withRepliedMessage(adapter: PlatformAdapter, bot: Bot, db: Db, event: NormalizedEvent, timeLeft: () => number): Promise<{ event: NormalizedEvent; unavailable: string | null }> {
  const id = event.repliesTo;
  if (id === undefined || !adapter.readReplied) return { event, unavailable: null };
  const noted = (why: string) => ({ event: { ...event, data: { ...event.data, reply_to: unreadReply(id, why) } }, unavailable: `the replied message ${id} (${why})` });
  // Asked together: one is the bot's own answer (./delivered-reply.ts), the other one it received; a Slack thread's
  // parent may have been read a moment ago for an earlier reply in the thread (./earlier-read-reply.ts).
  const [delivered, stored, readEarlier] = await Promise.all([
    deliveredReply(db, bot, event, id),
    storedReply(db, bot, event, id),
    event.repliedThreadId === undefined ? null : readForEarlierReply(db, bot, event, id),
  ]);
  if (delivered) return { event: withDeliveredReply(event, delivered, { message_id: id, actor: adapter.ownActor?.(bot, event) ?? null, quote: null }), unavailable: null };
  // As the platform would say it (lark/replied.ts): its words and files went with it.
  if (stored.state === "recalled") return noted(RECALLED);
  if (stored.state === "stored" && adapter.recordedReplied) {
    const recorded = await readIfLeftUnread(db, adapter, bot, event, stored.recorded, Math.min(timeLeft(), REREAD_TIMEOUT_MS));
    // Found recalled when read again (its recall missed): as one recorded so, its files gone with it.
    if (recorded === null) return noted(RECALLED);
    return { event: { ...event, files: [...event.files, ...stored.files], data: { ...event.data, reply_to: adapter.recordedReplied(recorded) } }, unavailable: null };
  }
  // Recorded unanswered whatever it replies to: nothing to read it for (not a file left out either).
  if (adapter.addressedWithoutReplied && (await declinesUnaddressed(db, bot, event))) return { event: noted(DECLINED).event, unavailable: null };
  if (readEarlier) return { event: { ...event, data: { ...event.data, reply_to: readEarlier } }, unavailable: null };
  if (timeLeft() <= 0) return noted("not read within the platform's acknowledgement deadline");
  try {
    const read = await adapter.readReplied(bot, event, timeLeft());
    // Known only now (Lark names the replied message, not its sender): a reply to the bot addresses it.
    const addressed = read.byThisBot ? true : event.addressed;
    return { event: { ...event, files: [...event.files, ...read.files], data: { ...event.data, reply_to: read.context }, addressed }, unavailable: null };
  } catch (err) {
    if (!(err instanceof HostError) || err.status >= 500) throw err;
    return noted(scrubSecrets(err.message, bot.credentials));
  }
}

/**
 * A platform that gives the replied message whole (Telegram): its files as stored when the bot received it, when every
 * one of them still is; none when it was recalled; else as given, to download.
 */
export async function withStoredRepliedFiles(db: Db, bot: Bot, event: NormalizedEvent): Promise<NormalizedEvent> {
  const given = event.files.filter((f) => f.repliedMessageId !== undefined);
  if (given.length === 0 || given[0].fetchAnew) return event;
  const stored = await storedReply(db, bot, event, given[0].repliedMessageId!);
  const own = event.files.filter((f) => f.repliedMessageId === undefined);
  if (stored.state === "recalled") return { ...event, files: own };
  // Only when the record holds as many as Telegram gives now: else each is downloaded, as for a message never received.
  return stored.state === "stored" && stored.files.length === given.length ? { ...event, files: [...own, ...stored.files] } : event;
}
