import { and, eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { bot } from "../db/schema";
import { loggedError } from "../lib/describe-error";
import { parseJson } from "../lib/json";

/**
 * Why a bot last did not answer, kept on its row for its admin view: the
 * operator asking "why doesn't it answer?" reads it there instead of hunting
 * through logs or conversations whose ids they do not know. Each note is
 * written where its failure happens (never on a webhook or reply that went
 * well, so answering costs nothing more) and replaces the one before it.
 */

/** `registeredAt`: only while the bot is that registration of its id (Bot.registeredAt), when known. */
type BotRef = { botId: string; platform: string; registeredAt?: number };

export interface WebhookRefusalNote {
  at: string;
  reason: string;
}

export interface UnboundEventNote {
  at: string;
  event_id: string;
  event_type: string;
  conversation_id: string;
  thread_id: string | null;
  /** Why no agent took it, as the agents stood then (src/stores/unbound-reason.ts). */
  reason: string;
}

/** A delivery failure the host gave up on: the delivery trail's record, with the run and conversation it belongs to. */
export type DeliveryFailureNote = { at: string } & Record<string, unknown>;

/** The notes as the bot's view shows them; one never written is left out. */
export function botNotesView(row: { lastWebhookRefusalJson: string | null; lastUnboundEventJson: string | null; lastDeliveryFailureJson: string | null }) {
  return {
    last_webhook_refusal: parseJson<WebhookRefusalNote | undefined>(row.lastWebhookRefusalJson, undefined),
    last_unbound_event: parseJson<UnboundEventNote | undefined>(row.lastUnboundEventJson, undefined),
    last_delivery_failure: parseJson<DeliveryFailureNote | undefined>(row.lastDeliveryFailureJson, undefined),
  };
}

/**
 * A bot's refusal note is written at most this often by one Worker instance, whatever its reason: anyone can send
 * refused requests, and one alternating the check that fails (a stale timestamp, then a bad signature) would
 * otherwise cost a database write on every request.
 */
const REFUSAL_NOTE_INTERVAL_MS = 10_000;
const refusalsNoted = new Map<string, number>();

/**
 * A webhook refused (its signature or secret wrong, its credentials unopenable). Best effort: the refusal is answered
 * whatever happens here. The reason names the check that failed, never a secret.
 */
export async function noteWebhookRefusal(db: Db, ref: BotRef, reason: string): Promise<void> {
  const now = Date.now();
  const last = refusalsNoted.get(ref.botId);
  if (last !== undefined && now - last < REFUSAL_NOTE_INTERVAL_MS) return;
  refusalsNoted.set(ref.botId, now);
  const note: WebhookRefusalNote = { at: new Date(now).toISOString(), reason };
  await write(db, ref, { lastWebhookRefusalJson: JSON.stringify(note) });
}

/** A verified event no agent took. Best effort: the event is recorded and acknowledged whatever happens here. */
export async function noteUnboundEvent(db: Db, ref: BotRef, note: Omit<UnboundEventNote, "at">): Promise<void> {
  await write(db, ref, { lastUnboundEventJson: JSON.stringify({ at: new Date().toISOString(), ...note } satisfies UnboundEventNote) });
}

/** The statement noting a delivery failure, to batch with the delivery trail's records of it. */
export function deliveryFailureNote(db: Db, ref: BotRef, facts: Record<string, unknown>) {
  const note: DeliveryFailureNote = { at: new Date().toISOString(), ...facts };
  // A reply of a bot deleted and registered again is not the new one's to explain.
  const sameRegistration = ref.registeredAt === undefined ? undefined : eq(bot.createdAt, ref.registeredAt);
  return db.update(bot).set({ lastDeliveryFailureJson: JSON.stringify(note) }).where(and(eq(bot.botId, ref.botId), eq(bot.platform, ref.platform), sameRegistration));
}

async function write(db: Db, ref: BotRef, set: Partial<typeof bot.$inferInsert>): Promise<void> {
  try {
    // The platform too: a note never lands on another bot that took a deleted one's id.
    await db.update(bot).set(set).where(and(eq(bot.botId, ref.botId), eq(bot.platform, ref.platform)));
  } catch (err) {
    console.error(`bot ${ref.botId}: note not written: ${loggedError(err)}`);
  }
}
