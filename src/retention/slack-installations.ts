/**
 * Slack bots' installations learned ahead of their requests. A request for another installation of an app goes to the
 * bot registered for it (src/platforms/slack/siblings.ts), which must be known by then: a sibling not known yet is
 * asked then, two per request, and after an upgrade or a reseal with more of them Slack's three retries can run out
 * before the one the request is for was asked, and its event is lost. Each cron invocation digests a batch of the bots
 * not digested yet, then asks auth.test, with each bot's own token, which installation a few of those not known yet
 * are, and keeps it on their rows as a request would. Best effort: what is left, or gets no answer, is asked by a later
 * invocation, the least recently asked first, so bots that never get one hold no others back. A paused bot is never
 * asked (a paused bot calls no Slack API); a bot whose token Slack refused is not asked again until its credentials
 * change.
 */
import { and, asc, eq, isNull, sql } from "drizzle-orm";
import { writeAll, type Db } from "../db/client";
import { bot } from "../db/schema";
import { SealedSecretError } from "../lib/secret-box";
import { ADAPTERS } from "../platforms/registry";
import type { SlackCredentials } from "../platforms/slack/api";
import { askedInstallation, SlackInstallationUnknown } from "../platforms/slack/own-installation";
import type { Bot } from "../platforms/types";
import { credentialsRefused, keepUnanswered, unansweredAt, webhookInstallation } from "../stores/bot-installation";
import { digested, digester, digestWrite, pendingRows } from "../stores/bot-digests";
import { botOf, type BotRow } from "../stores/bots";

/** Bots one invocation digests at most (their credentials opened, nothing asked of Slack). */
const DIGESTED_PER_INVOCATION = 50;
/** Bots one invocation asks Slack about at most, and at once: a few seconds at most, whatever Slack does. */
const ASKED_PER_INVOCATION = 10;
const ASKED_AT_ONCE = 5;
/** Each auth.test call's bound: nothing waits on it, but a Slack that does not answer must not hold the cron. */
const AUTH_TEST_TIMEOUT_MS = 1_000;

export interface LearnedInstallations {
  /** Slack bots given their digest (or kept as not digestible). */
  digested: number;
  /** Slack bots whose installation was learned (asked of Slack, or a kept one keyed). */
  learned: number;
}

export async function learnSlackInstallations(db: Db): Promise<LearnedInstallations> {
  const digesting = await digester(db);
  const pending = await pendingRows(db, digesting, "slack", DIGESTED_PER_INVOCATION);
  const writes: unknown[] = [];
  for (const row of pending) {
    const digest = await digesting.of(row, () => botOf(row, db.secrets));
    if (digest !== null) writes.push(digestWrite(db, row, digest));
  }
  await writeAll(db, writes);

  // Digested (a bot whose credentials cannot be opened or read has nothing Slack could be asked with), so a lookup
  // finds it once known.
  const unknown = await db
    .select()
    .from(bot)
    .where(and(eq(bot.platform, "slack"), eq(bot.enabled, true), isNull(bot.installationKey), digested, sql`NOT ${credentialsRefused}`))
    .orderBy(sql`coalesce(${unansweredAt}, 0)`, asc(bot.createdAt), asc(bot.botId))
    .limit(ASKED_PER_INVOCATION);
  let learned = 0;
  for (let i = 0; i < unknown.length; i += ASKED_AT_ONCE) {
    const outcomes = await Promise.all(unknown.slice(i, i + ASKED_AT_ONCE).map((row) => learnInstallation(db, row)));
    learned += outcomes.filter(Boolean).length;
  }
  return { digested: writes.length, learned };
}

/** Whether the row's installation is known now. */
async function learnInstallation(db: Db, row: BotRow): Promise<boolean> {
  const installation = webhookInstallation(db, row);
  const kept = await installation.pinned();
  // Kept by the release before, which keys nothing: kept again, keyed (one naming no key is asked anew, else it would
  // be read first by every invocation).
  if (kept !== null && ADAPTERS.slack.installationKey?.(kept)) {
    await installation.pin(kept);
    return true;
  }
  let opened: Bot | null;
  try {
    opened = await botOf(row, db.secrets);
  } catch (err) {
    if (!(err instanceof SealedSecretError)) throw err;
    // Digested under a key since replaced: asked again after the others, once the key is back.
    opened = null;
  }
  if (opened === null) {
    await keepUnanswered(db, row, Date.now(), false);
    return false;
  }
  try {
    await installation.pin(await askedInstallation(opened as Bot<SlackCredentials>, AUTH_TEST_TIMEOUT_MS));
    return true;
  } catch (err) {
    if (!(err instanceof SlackInstallationUnknown)) throw err;
    await keepUnanswered(db, row, Date.now(), err.permanent);
    return false;
  }
}
