/**
 * Which installation of its platform app a bot is (Slack: its team, or its enterprise for an org-wide install, and
 * its app), kept on its row once the platform said so (src/platforms/slack/installation.ts asks, and checks each
 * request against it), with the key its siblings' lookups find it by (./bot-siblings.ts). What is kept names the
 * credentials it was learned with: once they change (a PUT, by this release or the one before, which knows nothing of
 * the column) it no longer counts, and is learned anew. When the cron asked ahead and the platform did not say
 * (src/retention/slack-installations.ts), the row keeps that instead, under the same credentials: when it was asked,
 * and whether the platform refused them (not asked again by the cron until they change).
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

/** As stored: what the platform said, and a digest of the sealed credentials it was said of. */
interface StoredInstallation {
  credentials_sha256: string;
  installation: Record<string, unknown>;
}

/** As stored when the platform was asked ahead of a request and did not say: no installation. */
interface StoredUnanswered {
  credentials_sha256: string;
  unanswered: { at: number; refused: boolean };
}

/** What the cron keeps when unanswered, read in SQL (null for no JSON: the row read as never asked, never a failed query). */
const unanswered = (field: "at" | "refused") => sql`(CASE WHEN json_valid(${bot.installationJson}) THEN json_extract(${bot.installationJson}, ${`$.unanswered.${field}`}) END)`;
/** When the cron last asked and got no answer (null: never), and whether the platform refused the credentials. */
export const unansweredAt = unanswered("at");
export const credentialsRefused = sql`(coalesce(${unanswered("refused")}, 0) = 1)`;

/**
 * Keeps that the platform, asked at `at`, did not say which installation the row is (`refused`: it refused the
 * credentials). Only over the row as read: an installation a request pinned meanwhile, or new credentials, stay.
 */
export async function keepUnanswered(db: Db, row: BotRow, at: number, refused: boolean): Promise<void> {
  const kept: StoredUnanswered = { credentials_sha256: await sha256Hex(row.credentialsJson), unanswered: { at, refused } };
  await db
    .update(bot)
    .set({ installationJson: JSON.stringify(kept) })
    .where(and(eq(bot.botId, row.botId), eq(bot.createdAt, row.createdAt), eq(bot.credentialsJson, row.credentialsJson), sql`${bot.installationJson} IS ${row.installationJson}`));
}

/** The row's installation as a webhook request reads it and keeps what it learns: only the row as read is written. */
export function webhookInstallation(db: Db, row: BotRow): WebhookInstallation {
  // Digested only for an adapter that asks (Slack's): the other platforms' webhooks pay nothing.
  let digest: Promise<string> | undefined;
  const credentials = () => (digest ??= sha256Hex(row.credentialsJson));
  // What this request pinned: read again when it is handed to this bot after a lookup asked the platform.
  let pinnedNow: Record<string, unknown> | undefined;
  // The column as last read or written here: a pin writes only over that, never over what another request or the
  // cron kept meanwhile (an app learned since, which an installation asked of the platform again would drop).
  let asRead = row.installationJson;
  return {
    async pinned() {
      if (pinnedNow) return pinnedNow;
      const stored = parseJson<Partial<StoredInstallation> | null>(row.installationJson, null);
      if (!stored?.installation || typeof stored.installation !== "object") return null;
      return stored.credentials_sha256 === (await credentials()) ? stored.installation : null;
    },
    async pin(installation) {
      pinnedNow = installation;
      const kept: StoredInstallation = { credentials_sha256: await credentials(), installation };
      const installationKey = (isPlatform(row.platform) && ADAPTERS[row.platform].installationKey?.(installation)) || null;
      const json = JSON.stringify(kept);
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
