/**
 * Platform events written to EventLog and nothing more: no transcript item, no run, no reply. What the host does not
 * handle (`platform.unhandled`), and what a paused bot received (`bot_disabled`): recorded with its words, so an
 * operator sees what arrived meanwhile, yet kept out of the transcript, where a run after the pause would read
 * questions nobody was asked to answer.
 */
import { dbOf } from "../db/connect";
import { eventLog } from "../db/schema";
import type { Env } from "../env";
import { headOf, storableText } from "../lib/text";
import { conversationKey } from "../stores/conversation-key";
import { audienceMetadata } from "./audience";
import { messageRefOf } from "./message-ref";
import type { Bot, NormalizedEvent } from "./types";

export const UNHANDLED_EVENT_TYPE = "platform.unhandled";
export const BOT_DISABLED = "bot_disabled";

interface RecordOnly {
  eventId: string;
  rawRef: string;
  eventType: string;
  disposition: string;
  /** The words and actor's name as a run would have had them (a paused bot's event); left out, neither is kept. */
  withInput?: boolean;
  metadata: Record<string, unknown>;
}

export async function recordOnly(env: Env, bot: Bot, event: NormalizedEvent, rec: RecordOnly): Promise<void> {
  const key = event.conversationId ? conversationKey({ workspaceId: bot.workspaceId, botId: bot.botId, conversationId: event.conversationId, threadId: event.threadId }) : null;
  const text = rec.withInput && event.text !== null ? storableText(event.text) : null;
  const actorName = rec.withInput && event.actor?.actor_name ? storableText(event.actor.actor_name) : null;
  await dbOf(env)
    .insert(eventLog)
    .values({
      eventId: rec.eventId,
      eventType: rec.eventType,
      eventTime: event.eventTime ?? new Date().toISOString(),
      source: bot.platform,
      sourceEventType: event.sourceEventType,
      workspaceId: bot.workspaceId,
      botId: bot.botId,
      conversationKey: key,
      conversationId: event.conversationId,
      threadId: event.threadId,
      actorType: event.actor?.actor_type ?? null,
      actorId: event.actor?.actor_id ?? null,
      actorName,
      inputJson: rec.withInput ? JSON.stringify({ text, contents: [], attachments: [] }) : null,
      inputSummary: text ? headOf(text, 200) : null,
      dataJson: JSON.stringify(event.data),
      rawRef: rec.rawRef,
      disposition: rec.disposition,
      // Marked as a run's event is (a paused bot's private press keeps its words): runs answering others never read it.
      metadataJson: JSON.stringify({ ...rec.metadata, ...audienceMetadata(event.replyTarget) }),
      // Kept with its words: a recall or edit of it finds it, as it finds a message that ran (revise-waiting.ts).
      messageRef: rec.withInput ? messageRefOf(bot.platform, event) : null,
      createdAt: Date.now(),
    })
    // A redelivery, or an event recorded before (before a pause, or before the bot was paused again): the first stays.
    .onConflictDoNothing();
}

/** A paused bot's event: recorded as it came, its files not fetched (a paused bot calls no platform API for them). */
export function recordPaused(env: Env, bot: Bot, event: NormalizedEvent, { eventId, rawRef, eventType }: { eventId: string; rawRef: string; eventType: string }): Promise<void> {
  const files = event.files.map((f) => `${f.name ?? "a file"} (not fetched: the bot is disabled)`);
  const metadata = { source_event_type: event.sourceEventType, ...(files.length ? { attachments_unavailable: files.join("; ") } : {}) };
  return recordOnly(env, bot, event, { eventId, rawRef, eventType, disposition: BOT_DISABLED, withInput: true, metadata });
}
