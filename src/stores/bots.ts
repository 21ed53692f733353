import { and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { bot, chatAlias } from "../db/schema";
import { iso, parseJson } from "../lib/json";
import { ADAPTERS } from "../platforms/registry";
import { openValues, type SecretBox } from "../lib/secret-box";
import { type Bot, isPlatform } from "../platforms/types";
import { maskUrl } from "../resources/secrets";
import { botSlot } from "./secret-slots";
import { botNotesView } from "./bot-notes";
import { installationView } from "./bot-installation-view";

export type BotRow = typeof bot.$inferSelect;

export const webhookPath = (platform: string, botId: string) => `/v1/webhooks/${platform}/${encodeURIComponent(botId)}`;

/** Public view: which credentials are set, never their values; which installation it is; why the bot last did not answer. */
export async function toBotView(row: BotRow, publicBaseUrl: string) {
  return {
    bot_id: row.botId,
    platform: row.platform,
    name: row.name ?? undefined,
    workspace_id: row.workspaceId ?? undefined,
    api_base_url: row.apiBaseUrl ? maskUrl(row.apiBaseUrl) : undefined,
    webhook_url: `${publicBaseUrl}${webhookPath(row.platform, row.botId)}`,
    // False: paused, so its events are recorded (`bot_disabled`) and answered by no run.
    enabled: row.enabled,
    credential_fields: Object.keys(parseJson<Record<string, unknown>>(row.credentialsJson, {})).sort(),
    created_at: iso(row.createdAt),
    updated_at: iso(row.updatedAt),
    // Slack's: which installation of its app it is, or why that is not known yet.
    ...(await installationView(row)),
    // Why it last did not answer: a webhook refused, an event no agent took, a reply the platform refused.
    ...botNotesView(row),
  };
}


/** A row as the adapters use it: credentials opened and parsed by the platform's schema, the API origin resolved. Null when unusable. */
export async function botOf(row: BotRow, secrets: SecretBox): Promise<Bot | null> {
  if (!isPlatform(row.platform)) return null;
  const adapter = ADAPTERS[row.platform];
  const stored = parseJson<Record<string, unknown> | null>(row.credentialsJson, null);
  const credentials = adapter.credentials.safeParse(stored && (await openValues(secrets, stored, botSlot(row))));
  if (!credentials.success) return null;
  return {
    botId: row.botId,
    platform: row.platform,
    name: row.name,
    workspaceId: row.workspaceId,
    apiBaseUrl: row.apiBaseUrl ?? adapter.defaultApiBaseUrl,
    credentials: credentials.data,
    enabled: row.enabled,
    registeredAt: row.createdAt,
  };
}

export function botsStore(db: Db) {
  return {
    get: (botId: string) => db.select().from(bot).where(eq(bot.botId, botId)).get(),
    async create(row: BotRow) {
      await db.insert(bot).values(row);
    },
    /**
     * Replaces the row only if it is still as `read` left it: answers false when it was deleted or changed meanwhile.
     * `credentialsNamed`: the PUT gave credentials, which void what was learned of the ones before.
     */
    async replace(row: BotRow, read: BotRow, credentialsNamed = false): Promise<boolean> {
      // The notes and the installation are the host's to write: a PUT neither clears nor restores them, but for
      // credentials it names. Changed ones void the installation all the same (./bot-installation.ts, the migration's
      // trigger); the same token stored as given (no SECRETS_KEY) changes nothing stored, yet is the operator's word
      // that it works now (a refusal kept of it is asked again).
      const { botId, createdAt: _createdAt, lastWebhookRefusalJson: _refusal, lastUnboundEventJson: _unbound, lastDeliveryFailureJson: _delivery, installationJson: _installation, installationKey: _key, appSecretDigest, ...rest } = row;
      const [done] = await db.batch([
        db
          .update(bot)
          .set(credentialsNamed ? { ...rest, installationJson: null, installationKey: null } : rest)
          .where(and(eq(bot.botId, botId), eq(bot.createdAt, read.createdAt), eq(bot.updatedAt, read.updatedAt), eq(bot.credentialsJson, read.credentialsJson)))
          .returning({ botId: bot.botId }),
        // After the credentials, whose change voids the digest (the migration's trigger, for every release's PUT): the
        // digest of the new ones, or of the same secret when they were only moved to a new API origin.
        db
          .update(bot)
          .set({ appSecretDigest })
          .where(and(eq(bot.botId, botId), eq(bot.createdAt, read.createdAt), eq(bot.credentialsJson, rest.credentialsJson))),
      ]);
      return done.length === 1;
    },
    /**
     * The bot as read (its registration, `createdAt`: one deleted and registered anew under its id since is another,
     * which stays), with the chat moves learned for it: no later registration takes those (src/stores/chat-moves.ts),
     * so nothing would ever read them again. Answers false when it was already gone.
     */
    async remove(read: Pick<BotRow, "botId" | "createdAt">): Promise<boolean> {
      const asRead = and(eq(bot.botId, read.botId), eq(bot.createdAt, read.createdAt));
      const [, removed] = await db.batch([
        db.delete(chatAlias).where(and(eq(chatAlias.botId, read.botId), sql`EXISTS (SELECT 1 FROM ${bot} WHERE ${asRead})`)),
        db.delete(bot).where(asRead).returning({ botId: bot.botId }),
      ]);
      return removed.length > 0;
    },
    /** The bot ready for its adapter, or undefined when absent or unusable. */
    async load(botId: string): Promise<Bot | undefined> {
      const row = await this.get(botId);
      return (row && (await botOf(row, db.secrets))) ?? undefined;
    },
  };
}
