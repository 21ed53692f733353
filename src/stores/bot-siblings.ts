/**
 * The bots registered for other installations of a bot's platform app (../platforms/siblings.ts), found by the keyed
 * digest of the secret the app's installations share and by the key of their installation, both indexed. No
 * credentials are opened but those of rows not digested yet (./bot-digests.ts), a bounded number per lookup, each once
 * (a row whose credentials cannot be opened is kept so, and opened again only once the host's keys change).
 */
import { and, asc, eq, inArray, isNull, ne, or, sql } from "drizzle-orm";
import { writeAll, type Db } from "../db/client";
import { bot } from "../db/schema";
import { loggedError } from "../lib/describe-error";
import { ADAPTERS } from "../platforms/registry";
import type { SiblingBot, SiblingDirectory } from "../platforms/siblings";
import type { Bot, PlatformName, WebhookInstallation } from "../platforms/types";
import { webhookInstallation } from "./bot-installation";
import { appSecretDigests, digester, digestWrite, pendingRows } from "./bot-digests";
import { botOf, type BotRow } from "./bots";

/** Rows one lookup digests at most: the first lookups after the upgrade digest the bots registered before, a batch each. */
const DIGESTED_PER_LOOKUP = 20;
/** Siblings one lookup reads at most: those kept under the installation asked for first, then those not known yet. */
const READ_PER_LOOKUP = 50;

/** A row read by a lookup: its installation as kept, its credentials opened once when asked. */
interface Candidate {
  row: BotRow;
  installation: WebhookInstallation;
  open(): Promise<Bot | null>;
}

function candidate(db: Db, row: BotRow): Candidate {
  let opened: Promise<Bot | null> | undefined;
  return { row, installation: webhookInstallation(db, row), open: () => (opened ??= botOf(row, db.secrets)) };
}

/** The siblings of the bot whose row is `of` (never itself). */
export function siblingDirectory(db: Db, of: BotRow): SiblingDirectory {
  const platform = of.platform as PlatformName;
  return {
    async sharing(appSecret, installationKeys) {
      const [digests, digesting] = await Promise.all([appSecretDigests(db, appSecret), digester(db)]);
      const others = and(eq(bot.platform, platform), ne(bot.botId, of.botId));
      const keyed = installationKeys.length > 0 ? or(inArray(bot.installationKey, installationKeys), isNull(bot.installationKey)) : isNull(bot.installationKey);
      const [shared, undigested] = await db.batch([
        db.select().from(bot).where(and(others, inArray(bot.appSecretDigest, digests), keyed)).orderBy(sql`${bot.installationKey} IS NULL`, asc(bot.createdAt), asc(bot.botId)).limit(READ_PER_LOOKUP + 1),
        pendingRows(db, digesting, platform, DIGESTED_PER_LOOKUP + 1, of.botId),
      ]);
      const writes: unknown[] = [];
      // The bot asking is digested too, for lookups made at its siblings' addresses: its secret is the one given.
      if (of.appSecretDigest === null || !digests.includes(of.appSecretDigest)) writes.push(digestWrite(db, of, digests[0]));
      const found = shared.slice(0, READ_PER_LOOKUP).map((row) => candidate(db, row));
      for (const row of undigested.slice(0, DIGESTED_PER_LOOKUP)) {
        const c = candidate(db, row);
        const digest = await digesting.of(row, c.open);
        if (digest === null) continue;
        writes.push(digestWrite(db, row, digest));
        if (digests.includes(digest)) found.push(c);
      }
      const bots: (SiblingBot & { row: BotRow })[] = [];
      for (const c of found) {
        const pinned = await c.installation.pinned();
        const key = pinned && (ADAPTERS[platform].installationKey?.(pinned) ?? null);
        // Kept by the release before, which keys nothing: keyed now, for the lookups to come.
        if (key && c.row.installationKey === null) writes.push(keyWrite(db, c.row, key));
        if (pinned !== null && (key === null || !installationKeys.includes(key))) continue;
        bots.push({ row: c.row, botId: c.row.botId, pinned, installation: c.installation, open: c.open });
      }
      // Best effort: what was not kept is worked out again by the next lookup.
      await writeAll(db, writes).catch((err: unknown) => console.error(`bot ${of.botId}: its siblings' digests or installation keys were not kept: ${loggedError(err)}`));
      bots.sort((a, b) => a.row.createdAt - b.row.createdAt || (a.botId < b.botId ? -1 : 1));
      return { bots, complete: shared.length <= READ_PER_LOOKUP && undigested.length <= DIGESTED_PER_LOOKUP };
    },
  };
}

const keyWrite = (db: Db, row: BotRow, key: string) =>
  db.update(bot).set({ installationKey: key }).where(and(eq(bot.botId, row.botId), eq(bot.createdAt, row.createdAt), eq(bot.installationJson, row.installationJson!)));
