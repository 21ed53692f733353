import * as z from "zod";
import type { Db } from "../../db/client";
import { dbOf } from "../../db/connect";
import { moveSealedValues, sealValues } from "../../lib/secret-box";
import { parseJson } from "../../lib/json";
import { botSlot } from "../../stores/secret-slots";
import { configOf } from "../../env";
import { badRequest, conflict, HostError, notFound } from "../../lib/errors";
import { insertUnique } from "./unique";
import { newId } from "../../lib/ids";
import { jsonBody, noBody, validate } from "../../middleware/validate";
import { formatZodIssues, ScopedIdSchema } from "../../protocol/common";
import { scrubSecrets } from "../../platforms/redact";
import { ADAPTERS } from "../../platforms/registry";
import { PLATFORMS, type Bot, type PlatformAdapter, type PlatformName } from "../../platforms/types";
import { botOf, botsStore, toBotView, webhookPath, type BotRow } from "../../stores/bots";
import { appSecretDigest } from "../../stores/bot-digests";
import { publicBaseUrl, router } from "../app-env";
import { maskUrl } from "../../resources/secrets";
import { EndpointSchema } from "../../resources/ids";
import { bot } from "../../db/schema";
import { selectPage } from "../../stores/list-page";
import { AdminListQuery, listing } from "./list-page";
import { checkReadAsStored, replaceOrExplain } from "./replace";
import { nextUpdatedAt } from "../../lib/updated-at";

const BotFields = {
  name: z.string().min(1).max(200).regex(/^[^\p{Cc}\p{Cs}]*$/u, "must not contain control characters or unpaired surrogates").optional(),
  // Stamped on every event of the bot: refused as an event's own workspace_id would be.
  workspace_id: ScopedIdSchema.optional(),
  // Tests point this at a fake platform on loopback; production leaves it unset.
  api_base_url: EndpointSchema.optional(),
  // false pauses the bot (its events are recorded, nothing runs); left out, a new bot is enabled and a PUT keeps it as it is.
  enabled: z.boolean().optional(),
};

const CreateBot = z.strictObject({
  bot_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/).optional(),
  platform: z.enum(PLATFORMS),
  ...BotFields,
  credentials: z.record(z.string(), z.string()),
});

/**
 * PUT replaces the bot's settings; `credentials` and `enabled` left out are kept (credentials given replace all of
 * them). It takes the body of POST, or what GET answered sent back as it is: its view-only fields are ignored
 * (`bot_id` must be the path's).
 */
const ReplaceBot = z.strictObject({
  platform: z.enum(PLATFORMS).optional(),
  ...BotFields,
  credentials: z.record(z.string(), z.string()).optional(),
  bot_id: z.string().optional(),
  webhook_url: z.string().optional(),
  credential_fields: z.array(z.string()).optional(),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
  last_webhook_refusal: z.unknown().optional(),
  last_unbound_event: z.unknown().optional(),
  last_delivery_failure: z.unknown().optional(),
  installation: z.unknown().optional(),
  installation_unknown: z.unknown().optional(),
});

type BotDestination = Pick<BotRow, "botId" | "platform" | "apiBaseUrl">;

/**
 * Valid for the platform's own credential schema (issues name fields, never values), then sealed value by value (their
 * names stay listable); with the keyed digest of the secret its app's installations share (Slack's signing secret).
 */
async function checkedCredentials(db: Db, bot: BotDestination, credentials: Record<string, string>): Promise<Pick<BotRow, "credentialsJson" | "appSecretDigest">> {
  const platform = bot.platform as PlatformName;
  const parsed = (ADAPTERS[platform].newCredentials ?? ADAPTERS[platform].credentials).safeParse(credentials);
  if (!parsed.success) throw badRequest(`invalid credentials for ${platform}: ${formatZodIssues(parsed.error)}`);
  return {
    credentialsJson: JSON.stringify(await sealValues(db.secrets, parsed.data as Record<string, unknown>, botSlot(bot))),
    appSecretDigest: await appSecretDigest(db, platform, parsed.data),
  };
}

/** The stored credentials, sealed again for the bot's new API origin when it changed. */
async function movedCredentials(db: Db, row: BotRow, to: BotDestination): Promise<string> {
  if (row.apiBaseUrl === to.apiBaseUrl) return row.credentialsJson;
  return JSON.stringify(await moveSealedValues(db.secrets, parseJson<Record<string, unknown>>(row.credentialsJson, {}), botSlot(row), botSlot(to)));
}

const trimSlash = (url: string | undefined) => (url ? url.replace(/\/+$/, "") : null);

async function existing(db: ReturnType<typeof dbOf>, botId: string): Promise<BotRow> {
  const row = await botsStore(db).get(botId);
  if (!row) throw notFound(`bot ${botId} not found`);
  return row;
}

export const botsRouter = router()
  .get("/", validate("query", AdminListQuery), async (c) => {
    const base = publicBaseUrl(c.env, c.req.url);
    return listing(c, c.req.valid("query"), {
      kind: "bots",
      read: (page) => selectPage(dbOf(c.env), bot, { time: bot.createdAt, id: bot.botId }, page),
      position: (row) => ({ time: row.createdAt, id: row.botId }),
      view: (rows) => Promise.all(rows.map((row) => toBotView(row, base))),
    });
  })
  .post("/", jsonBody(CreateBot), async (c) => {
    const db = dbOf(c.env);
    const input = c.get("body");
    const botId = input.bot_id ?? newId("bot");
    const store = botsStore(db);
    if (await store.get(botId)) throw conflict(`bot ${botId} already exists`);
    const now = Date.now();
    const destination = { botId, platform: input.platform, apiBaseUrl: trimSlash(input.api_base_url) };
    const row: BotRow = {
      ...destination,
      name: input.name ?? null,
      workspaceId: input.workspace_id ?? null,
      ...(await checkedCredentials(db, destination, input.credentials)),
      enabled: input.enabled ?? true,
      createdAt: now,
      updatedAt: now,
      lastWebhookRefusalJson: null,
      lastUnboundEventJson: null,
      lastDeliveryFailureJson: null,
      installationJson: null,
      installationKey: null,
    };
    // A concurrent create of the same id passed the check above too: its insert is refused (409), not a 500.
    await insertUnique(() => store.create(row), `bot ${botId}`);
    return c.json(await toBotView(row, publicBaseUrl(c.env, c.req.url)), 201);
  })
  .get("/:botId", async (c) => c.json(await toBotView(await existing(dbOf(c.env), c.req.param("botId")), publicBaseUrl(c.env, c.req.url))))
  .put("/:botId", jsonBody(ReplaceBot), async (c) => {
    const db = dbOf(c.env);
    const input = c.get("body");
    const row = await existing(db, c.req.param("botId"));
    if (input.platform && input.platform !== row.platform) throw badRequest("a bot's platform cannot change; register a new bot");
    if (input.bot_id !== undefined && input.bot_id !== row.botId) throw badRequest(`bot_id ${input.bot_id} is not the bot at this path (${row.botId})`);
    checkReadAsStored(input.updated_at, row.updatedAt, `bot ${row.botId}`);
    // The view's URL sent back as it was (credentials masked) keeps the stored one.
    const destination = { ...row, apiBaseUrl: row.apiBaseUrl && input.api_base_url === maskUrl(row.apiBaseUrl) ? row.apiBaseUrl : trimSlash(input.api_base_url) };
    const updated: BotRow = {
      ...destination,
      name: input.name ?? null,
      workspaceId: input.workspace_id ?? null,
      // Credentials left out keep their secret, and its digest, wherever they are sealed for; those given void what was
      // learned of the ones before (its view then says so).
      ...(input.credentials
        ? { ...(await checkedCredentials(db, destination, input.credentials)), installationJson: null, installationKey: null }
        : { credentialsJson: await movedCredentials(db, row, destination), appSecretDigest: row.appSecretDigest }),
      // Left out, as the credentials are, it is kept: a PUT that does not name the pause does not end it.
      enabled: input.enabled ?? row.enabled,
      updatedAt: nextUpdatedAt(row.updatedAt),
    };
    // Only over the row as read: a concurrent DELETE is a 404 (a bot registered anew under its id since is not the one
    // read), a concurrent PUT (a rotated credential) a 409, never undone.
    await replaceOrExplain(() => botsStore(db).replace(updated, row, input.credentials !== undefined), row, () => botsStore(db).get(row.botId), `bot ${row.botId}`);
    return c.json(await toBotView(updated, publicBaseUrl(c.env, c.req.url)));
  })
  .delete("/:botId", async (c) => {
    const db = dbOf(c.env);
    const row = await existing(db, c.req.param("botId"));
    // Deleted (and perhaps registered anew) by another call meanwhile: that bot is not this DELETE's to remove.
    if (!(await botsStore(db).remove(row))) throw notFound(`bot ${row.botId} not found (deleted meanwhile)`);
    return c.body(null, 204);
  })
  /** Point the platform at this host's webhook, where its API allows it (Telegram's setWebhook with the secret token). */
  .post("/:botId/webhook", noBody(), async (c) => {
    const { bot, change } = await webhookChange(dbOf(c.env), c.req.param("botId"), "registerWebhook");
    const url = `${publicBaseUrl(c.env, c.req.url)}${webhookPath(bot.platform, bot.botId)}`;
    const res = await change(bot, url, configOf(c.env).PLATFORM_API_TIMEOUT_MS);
    if (!res.ok) throw new HostError(502, "bad_gateway", `${bot.platform} refused the webhook: ${scrubSecrets(res.failure.message, bot.credentials)}`);
    return c.json({ bot_id: bot.botId, webhook_url: url, registered: true });
  })
  /** Stop the platform calling this host (Telegram's deleteWebhook): before the bot's DELETE, which the platform is not told of. */
  .delete("/:botId/webhook", async (c) => {
    const { bot, change } = await webhookChange(dbOf(c.env), c.req.param("botId"), "removeWebhook");
    const res = await change(bot, configOf(c.env).PLATFORM_API_TIMEOUT_MS);
    if (!res.ok) throw new HostError(502, "bad_gateway", `${bot.platform} refused to remove the webhook: ${scrubSecrets(res.failure.message, bot.credentials)}`);
    return c.json({ bot_id: bot.botId, registered: false });
  });

/** The bot and its platform's call that changes its webhook; a 400 where only the platform's console can. */
async function webhookChange<K extends "registerWebhook" | "removeWebhook">(db: Db, botId: string, call: K): Promise<{ bot: Bot; change: NonNullable<PlatformAdapter[K]> }> {
  const row = await existing(db, botId);
  const bot = await botOf(row, db.secrets);
  if (!bot) throw new HostError(409, "conflict", `bot ${row.botId} has unusable credentials; PUT new ones`);
  const change = ADAPTERS[bot.platform][call];
  if (!change) throw badRequest(`${bot.platform} webhooks are set in the platform's developer console: use the bot's webhook_url there`);
  return { bot, change };
}
