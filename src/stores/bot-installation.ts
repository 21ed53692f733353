/**
 * Which installation of its platform app a bot is (Slack: its team, or its enterprise for an org-wide install, and
 * its app), kept on its row once the platform said so (src/platforms/slack/installation.ts asks, and checks each
 * request against it), with the key its siblings' lookups find it by (./bot-siblings.ts). What is kept names the
 * credentials it was learned with: once they change (a PUT, by this release or the one before, which knows nothing of
 * the column) it no longer counts, and is learned anew. When the platform was asked and did not say, the row keeps
 * that instead, under the same credentials: when it was asked, and whether the platform refused them (then not asked
 * again by the cron until they change, nor by a request for a while). The cron keeps every such answer
 * (src/retention/slack-installations.ts), a request only a refusal.
 */
import { and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { bot } from "../db/schema";
import { sha256Hex } from "../lib/crypto";
import { loggedError } from "../lib/describe-error";
import { parseJson } from "../lib/json";
import type { BotRow } from "./bots";
import { isPlatform, type WebhookInstallation } from "../platforms/types";
import { ADAPTERS } from "../platforms/registry";

/** As stored: what the platform said, a digest of the sealed credentials it was said of, and when it was first said (kept by earlier releases without). */
interface StoredInstallation {
  credentials_sha256: string;
  installation: Record<string, unknown>;
  learned_at?: number;
}

/**
 * As stored when the platform was asked and did not say: no installation. `refused`: it refused the credentials;
 * `cause`: they could not be asked with at all (the cron's only).
 */
export interface Unanswered {
  at: number;
  refused: boolean;
  cause?: "unopenable" | "unreadable";
}
interface StoredUnanswered {
  credentials_sha256: string;
  unanswered: Unanswered;
}

/** What the row keeps of its installation, when it was kept of its current credentials (else nothing: never asked of those). */
export async function keptOf(row: Pick<BotRow, "installationJson" | "credentialsJson">, credentialsSha256 = sha256Hex(row.credentialsJson)): Promise<Partial<StoredInstallation & StoredUnanswered> | null> {
  const stored = parseJson<Partial<StoredInstallation & StoredUnanswered> | null>(row.installationJson, null);
  if (stored === null || typeof stored !== "object") return null;
  return stored.credentials_sha256 === (await credentialsSha256) ? stored : null;
}

/** The installation kept, if it is one (an object). */
export const installationIn = (kept: Partial<StoredInstallation> | null) => (kept?.installation && typeof kept.installation === "object" ? kept.installation : null);
/** When the platform refused the credentials, if it did. */
const refusedIn = (kept: Partial<StoredUnanswered> | null) => (kept?.unanswered?.refused === true && typeof kept.unanswered.at === "number" ? kept.unanswered.at : null);

/** What the cron keeps when unanswered, read in SQL (null for no JSON: the row read as never asked, never a failed query). */
const unanswered = (field: "at" | "refused") => sql`(CASE WHEN json_valid(${bot.installationJson}) THEN json_extract(${bot.installationJson}, ${`$.unanswered.${field}`}) END)`;
/** When the cron last asked and got no answer (null: never), and whether the platform refused the credentials. */
export const unansweredAt = unanswered("at");
export const credentialsRefused = sql`(coalesce(${unanswered("refused")}, 0) = 1)`;

/**
 * Keeps that the platform, asked at `unanswered.at`, did not say which installation the row is. Only over the column
 * as `asRead` (the row's, unless given): an installation a request pinned meanwhile, or new credentials, stay.
 * Answers the JSON written, or null when nothing was.
 */
export async function keepUnanswered(db: Db, row: BotRow, unanswered: Unanswered, asRead = row.installationJson): Promise<string | null> {
  const kept: StoredUnanswered = { credentials_sha256: await sha256Hex(row.credentialsJson), unanswered };
  const json = JSON.stringify(kept);
  const written = await db
    .update(bot)
    .set({ installationJson: json })
    .where(and(eq(bot.botId, row.botId), eq(bot.createdAt, row.createdAt), eq(bot.credentialsJson, row.credentialsJson), sql`${bot.installationJson} IS ${asRead}`))
    .returning({ botId: bot.botId });
  return written.length > 0 ? json : null;
}

/** The row's installation as a webhook request reads it and keeps what it learns: only the row as read is written. */
export function webhookInstallation(db: Db, row: BotRow): WebhookInstallation {
  // Digested only for an adapter that asks (Slack's): the other platforms' webhooks pay nothing.
  let digest: Promise<string> | undefined;
  const credentials = () => (digest ??= sha256Hex(row.credentialsJson));
  let read: ReturnType<typeof keptOf> | undefined;
  const kept = () => (read ??= keptOf(row, credentials()));
  // What this request pinned: read again when it is handed to this bot after a lookup asked the platform.
  let pinnedNow: Record<string, unknown> | undefined;
  // When what is pinned was first learned (null: by a release that kept no time), once a pin has read it: kept as it
  // was when only the app is learned since, or the key written.
  let learnedAt: number | null | undefined;
  // When this request kept that the platform refused the credentials.
  let refusedNow: number | undefined;
  // The column as last read or written here: a pin writes only over that, never over what another request or the
  // cron kept meanwhile (an app learned since, which an installation asked of the platform again would drop).
  let asRead = row.installationJson;
  return {
    async pinned() {
      return pinnedNow ?? installationIn(await kept());
    },
    async refusedAt() {
      return pinnedNow ? null : (refusedNow ?? refusedIn(await kept()));
    },
    async keepRefused(at) {
      refusedNow = at;
      try {
        asRead = (await keepUnanswered(db, row, { at, refused: true }, asRead)) ?? asRead;
      } catch (err) {
        // Best effort: the next request, or the cron, asks the platform again.
        console.error(`bot ${row.botId}: that the platform refused its credentials was not kept: ${loggedError(err)}`);
      }
    },
    async pin(installation) {
      if (learnedAt === undefined) {
        const stored = await kept();
        learnedAt = installationIn(stored) === null ? Date.now() : typeof stored?.learned_at === "number" ? stored.learned_at : null;
      }
      pinnedNow = installation;
      const stored: StoredInstallation = { credentials_sha256: await credentials(), installation, ...(learnedAt === null ? {} : { learned_at: learnedAt }) };
      const installationKey = (isPlatform(row.platform) && ADAPTERS[row.platform].installationKey?.(installation)) || null;
      const json = JSON.stringify(stored);
      try {
        // The same registration with the same credentials only: a PUT or a DELETE meanwhile makes it another bot's.
        const written = await db
          .update(bot)
          .set({ installationJson: json, installationKey })
          .where(and(eq(bot.botId, row.botId), eq(bot.createdAt, row.createdAt), eq(bot.credentialsJson, row.credentialsJson), sql`${bot.installationJson} IS ${asRead}`))
          .returning({ botId: bot.botId });
        if (written.length > 0) asRead = json;
      } catch (err) {
        // Best effort: the request was checked against it all the same, and the next one asks the platform again.
        console.error(`bot ${row.botId}: its installation was not kept: ${loggedError(err)}`);
      }
    },
  };
}
