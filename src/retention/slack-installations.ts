/**
 * Slack bots' installations learned ahead of their requests. A request for another installation of an app goes to the
 * bot registered for it (src/platforms/slack/siblings.ts), which must be known by then: a sibling not known yet is
 * asked then, two per request, and after an upgrade or a reseal with more of them Slack's three retries can run out
 * before the one the request is for was asked, and its event is lost. Each cron invocation digests a batch of the bots
 * not digested yet, then asks auth.test, with each bot's own token, which installation those not known yet are (as
 * many as a time budget allows), and keeps it on their rows as a request would, never over what a request kept
 * meanwhile. Best effort: what is left, or gets no answer, is asked by a later
 * invocation, the least recently asked first, so bots that never get one hold no others back. A paused bot is never
 * asked (a paused bot calls no Slack API); a bot whose token Slack refused, here or at a request, is not asked again
 * until its credentials change.
 */
import { and, asc, eq, isNull, notInArray, sql } from "drizzle-orm";
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

/**
 * Bots one invocation asks Slack about: ten at once, each within 1 s, wave after wave while the step has spent less
 * than its budget, up to a cap (each costs a Slack call and a write, subrequests of the cron's invocation). The cron
 * runs hourly: at ten an invocation, a fleet of hundreds of bots took days to be known. A Slack that does not answer
 * holds the step for the budget and one wave more, however many are left.
 */
const ASKED_AT_ONCE = 10;
const ASKED_PER_INVOCATION = 100;
const ASKING_BUDGET_MS = 2_000;
/** Each auth.test call's bound: nothing waits on it, but a Slack that does not answer must not hold the cron. */
const AUTH_TEST_TIMEOUT_MS = 1_000;

export interface LearnedInstallations {
  /** Slack bots given their digest (or kept as not digestible). */
  digested: number;
  /** Slack bots whose installation was learned (asked of Slack, or a kept one keyed). */
  learned: number;
}

/** `digestLimit`: bots digested at most (their credentials opened, nothing asked of Slack): the retention batch size. */
export async function learnSlackInstallations(db: Db, digestLimit: number): Promise<LearnedInstallations> {
  const digesting = await digester(db);
  const pending = await pendingRows(db, digesting, "slack", digestLimit);
  const writes: unknown[] = [];
  for (const row of pending) {
    const digest = await digesting.of(row, () => botOf(row, db.secrets));
    if (digest !== null) writes.push(digestWrite(db, row, digest));
  }
  await writeAll(db, writes);

  const startedAt = Date.now();
  // Each bot once an invocation, by its id: one whose answer was not kept (its write failed) still reads as not asked.
  const asked = new Set<string>();
  let learned = 0;
  while (asked.size < ASKED_PER_INVOCATION && Date.now() - startedAt < ASKING_BUDGET_MS) {
    // Read wave by wave: a bot paused, deleted or learned by a request since the last wave is as it is now.
    const wave = await unknownInstallations(db, startedAt, [...asked], Math.min(ASKED_AT_ONCE, ASKED_PER_INVOCATION - asked.size));
    if (wave.length === 0) break;
    for (const row of wave) asked.add(row.botId);
    const outcomes = await Promise.all(wave.map((row) => learnInstallation(db, row)));
    learned += outcomes.filter(Boolean).length;
  }
  return { digested: writes.length, learned };
}

/**
 * Enabled Slack bots whose installation is not known, never asked first, then those asked least recently, but none
 * this invocation asked already (`asked`, or kept as asked since `startedAt`). Digested only (a bot whose credentials
 * cannot be opened or read has nothing Slack could be asked with), so a lookup finds it once known.
 */
const unknownInstallations = (db: Db, startedAt: number, asked: string[], limit: number) =>
  db
    .select()
    .from(bot)
    .where(
      and(
        eq(bot.platform, "slack"),
        eq(bot.enabled, true),
        isNull(bot.installationKey),
        digested,
        sql`NOT ${credentialsRefused}`,
        sql`coalesce(${unansweredAt}, 0) < ${startedAt}`,
        asked.length > 0 ? notInArray(bot.botId, asked) : undefined,
      ),
    )
    .orderBy(sql`coalesce(${unansweredAt}, 0)`, asc(bot.createdAt), asc(bot.botId))
    .limit(limit);

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
    await keepUnanswered(db, row, { at: Date.now(), refused: false, cause: "unopenable" });
    return false;
  }
  if (opened === null) {
    await keepUnanswered(db, row, { at: Date.now(), refused: false, cause: "unreadable" });
    return false;
  }
  try {
    await installation.pin(await askedInstallation(opened as Bot<SlackCredentials>, AUTH_TEST_TIMEOUT_MS));
    return true;
  } catch (err) {
    if (!(err instanceof SlackInstallationUnknown)) throw err;
    // Refused for good only when Slack refused the token itself: any other failure (a proxy's 4xx, a workspace moving
    // into an organization) is asked about again by a later invocation, after the bots never asked.
    await keepUnanswered(db, row, { at: Date.now(), refused: err.tokenRefused });
    return false;
  }
}
