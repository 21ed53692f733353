/**
 * A reply's message, read at ingress where the platform names it by id only (Lark's `parent_id`): its context in
 * `data.reply_to`, its files after the event's own. One that cannot be read in time, or at all, is said so as a file
 * left out is (`attachments_unavailable`), and in `reply_to.unavailable`: the event runs all the same.
 */
import { HostError } from "../lib/errors";
import { scrubSecrets } from "./redact";
import { unreadReply } from "./reply-context";
import type { Bot, NormalizedEvent, PlatformAdapter } from "./types";

export async function withRepliedMessage(adapter: PlatformAdapter, bot: Bot, event: NormalizedEvent, timeLeft: () => number): Promise<{ event: NormalizedEvent; unavailable: string | null }> {
  const id = event.repliesTo;
  if (id === undefined || !adapter.readReplied) return { event, unavailable: null };
  const noted = (why: string) => ({ event: { ...event, data: { ...event.data, reply_to: unreadReply(id, why) } }, unavailable: `the replied message ${id} (${why})` });
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
