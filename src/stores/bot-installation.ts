/**
 * Which installation of its platform app a bot is (Slack: its team, or its enterprise for an org-wide install, and
 * its app), kept on its row once the platform said so (src/platforms/slack/installation.ts asks, and checks each
 * request against it), with the key its siblings' lookups find it by (./bot-siblings.ts). What is kept names the
 * credentials it was learned with: once they change (a PUT, by this release or the one before, which knows nothing of
 * the column) it no longer counts, and is learned anew.
 */
import { and, eq } from "drizzle-orm";
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

/** The row's installation as a webhook request reads it and keeps what it learns: only the row as read is written. */
export function webhookInstallation(db: Db, row: BotRow): WebhookInstallation {
  // Digested only for an adapter that asks (Slack's): the other platforms' webhooks pay nothing.
  let digest: Promise<string> | undefined;
  const credentials = () => (digest ??= sha256Hex(row.credentialsJson));
  // What this request pinned: read again when it is handed to this bot after a lookup asked the platform.
  let pinnedNow: Record<string, unknown> | undefined;
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
      try {
        // The same registration with the same credentials only: a PUT or a DELETE meanwhile makes it another bot's.
        await db
          .update(bot)
          .set({ installationJson: JSON.stringify(kept), installationKey })
          .where(and(eq(bot.botId, row.botId), eq(bot.createdAt, row.createdAt), eq(bot.credentialsJson, row.credentialsJson)));
      } catch (err) {
        // Best effort: the request was checked against it all the same, and the next one asks the platform again.
        console.error(`bot ${row.botId}: its installation was not kept: ${loggedError(err)}`);
      }
    },
  };
}
