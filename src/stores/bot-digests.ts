/**
 * What a bot's row keeps of the secret its platform app's installations share (Slack's signing secret), by which
 * ./bot-siblings.ts finds it: a keyed digest, or a marker saying there is nothing to find it by. Rows not digested yet
 * (registered before migration 0031, or whose credentials were replaced since by the release before or a reseal) are
 * digested by the lookups that meet them and by the cron (src/retention/slack-installations.ts), a bounded number each.
 */
import { and, asc, eq, isNotNull, isNull, like, ne, notLike, or, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { bot } from "../db/schema";
import { sha256Hex } from "../lib/crypto";
import { SealedSecretError } from "../lib/secret-box";
import { ADAPTERS } from "../platforms/registry";
import type { Bot, PlatformName } from "../platforms/types";
import type { BotRow } from "./bots";

/** What the digest is of: its own key, derived from SECRETS_KEY for this purpose alone. */
const APP_SECRET_PURPOSE = "bot app secret";
/** Kept for a row whose credentials its platform cannot read (until a PUT replaces them): matches no digest. */
const UNUSABLE = "unusable";
/**
 * Kept for a row whose credentials cannot be opened (SealedSecretError), with what opening them depends on besides the
 * credentials: the keys the host has (a fingerprint, never the keys) and the row's API origin (their AES-GCM slot).
 * Matches no digest. Once either changes (SECRETS_KEY fixed, SECRETS_KEY_PREVIOUS set, the origin put back) the row
 * is to be digested again; new credentials (a PUT, a reseal) void it as they void a digest (the migration's trigger).
 */
const UNOPENABLE = "unopenable:";
const KEYS_PURPOSE = "bot credentials unopenable";

/** The digest to store for credentials of `platform`; null for a platform whose installations share no secret. */
export async function appSecretDigest(db: Db, platform: PlatformName, credentials: Record<string, string>): Promise<string | null> {
  const secretOf = ADAPTERS[platform].appSecret;
  return secretOf ? (await appSecretDigests(db, secretOf(credentials)))[0] : null;
}

/** The digests `appSecret` may be stored under: the current key's first, then those of keys it was digested under before. */
export const appSecretDigests = (db: Db, appSecret: string): Promise<string[]> => db.secrets.digests(appSecret, APP_SECRET_PURPOSE);

/** What a row's digest column says of its credentials when it holds a marker: they could not be opened, or read by their platform, when last tried. */
export const credentialsMarked = (appSecretDigest: string | null): "unopenable" | "unreadable" | null =>
  appSecretDigest === UNUSABLE ? "unreadable" : appSecretDigest?.startsWith(UNOPENABLE) ? "unopenable" : null;

/** Rows kept under a digest (not a marker): a lookup may find them. */
export const digested: SQL = and(isNotNull(bot.appSecretDigest), ne(bot.appSecretDigest, UNUSABLE), notLike(bot.appSecretDigest, `${UNOPENABLE}%`))!;

/** How the rows still to digest are told, and what to keep for each, under the keys the host has now. */
export interface Digester {
  /** Never digested, or kept as unopenable under other keys or another API origin than the row's now. */
  pending: SQL;
  /** What to keep for the row (its credentials opened by `open`): null for a platform whose installations share no secret. */
  of(row: BotRow, open: () => Promise<Bot | null>): Promise<string | null>;
}

export async function digester(db: Db): Promise<Digester> {
  // Of every key the box opens with: a key added (SECRETS_KEY_PREVIOUS) or replaced changes it.
  const keys = await sha256Hex((await db.secrets.digests("stored credentials", KEYS_PURPOSE)).join(" "));
  const unopenable = `${UNOPENABLE}${keys} `;
  return {
    pending: or(isNull(bot.appSecretDigest), and(like(bot.appSecretDigest, `${UNOPENABLE}%`), sql`${bot.appSecretDigest} IS NOT (${unopenable} || coalesce(${bot.apiBaseUrl}, ''))`))!,
    async of(row, open) {
      const platform = row.platform as PlatformName;
      if (!ADAPTERS[platform]?.appSecret) return null;
      let opened: Bot | null;
      try {
        opened = await open();
      } catch (err) {
        if (!(err instanceof SealedSecretError)) throw err;
        // Sealed under a key the host does not have: kept so, not to be opened again by every lookup (20 such rows
        // would fill each one's batch for good), until the keys or its origin change.
        return `${unopenable}${row.apiBaseUrl ?? ""}`;
      }
      return opened === null ? UNUSABLE : appSecretDigest(db, platform, opened.credentials);
    },
  };
}

/** The rows of `platform` still to digest, but `except`, oldest first: `limit` of them at most. */
export const pendingRows = (db: Db, found: Digester, platform: PlatformName, limit: number, except?: string) =>
  db
    .select()
    .from(bot)
    .where(and(eq(bot.platform, platform), except === undefined ? undefined : ne(bot.botId, except), found.pending))
    .orderBy(asc(bot.createdAt), asc(bot.botId))
    .limit(limit);

/** Only over the credentials it is the digest of: new ones meanwhile void it (the migration's trigger) and are digested anew. */
export const digestWrite = (db: Db, row: BotRow, digest: string) =>
  db.update(bot).set({ appSecretDigest: digest }).where(and(eq(bot.botId, row.botId), eq(bot.createdAt, row.createdAt), eq(bot.credentialsJson, row.credentialsJson)));
