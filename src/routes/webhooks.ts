import { dbOf } from "../db/connect";
import { configOf } from "../env";
import { HostError, notFound } from "../lib/errors";
import { tooLarge } from "../middleware/body-limit";
import { readCapped } from "../artifacts/read-capped";
import { compressedBodyRefusal } from "../lib/content-encoding";
import { ingestEvents } from "../platforms/ingest";
import { ADAPTERS } from "../platforms/registry";
import { isPlatform } from "../platforms/types";
import { botOf, botsStore } from "../stores/bots";
import { noteWebhookRefusal } from "../stores/bot-notes";
import { SealedSecretError } from "../lib/secret-box";
import { publicBaseUrl, router } from "./app-env";
import { receiveWebhook } from "./webhook-receive";
import { logWebhookRefused } from "./webhook-refused-log";

/**
 * POST /v1/webhooks/{platform}/{bot_id}: a chat platform calls in. Verified
 * first (401, failing closed), then recorded and handed to the conversation's
 * object; the answer goes back as soon as that is durable, well within the
 * platforms' 3 s, while the run continues in the Durable Object.
 */
export const webhooksRouter = router().post(
  "/:platform/:botId",
  async (c) => {
    // The platform's clock for our answer starts here, not after the bot is loaded and the request read.
    const receivedAt = Date.now();
    const platform = c.req.param("platform");
    const botId = c.req.param("botId");
    const config = configOf(c.env);
    const maxBytes = config.MAX_EVENT_BODY_BYTES;
    // Platforms never send more: an anonymous body declared larger is refused unread, before any lookup.
    if (Number(c.req.header("content-length") ?? NaN) > maxBytes) throw tooLarge(maxBytes);
    if (!isPlatform(platform)) throw notFound(`no webhook for platform ${platform}`);
    const db = dbOf(c.env);
    const row = await botsStore(db).get(botId);
    const bot = row && (await botOf(row, db.secrets).catch(async (err: unknown) => {
      if (!(err instanceof SealedSecretError)) throw err;
      // SECRETS_KEY changed or lost: every webhook of the bot fails (500) until it is fixed; its admin view and the log
      // say why. Answered as onError answers it, without its generic line: the refusal's own line says it.
      const refusal = new HostError(500, "secrets_unavailable", `${err.message}; check SECRETS_KEY and SECRETS_KEY_PREVIOUS`, undefined, { cause: err });
      const reason = `its stored credentials cannot be opened: ${refusal.message}`;
      logWebhookRefused({ platform, botId }, { status: refusal.status, code: refusal.code, reason });
      await noteWebhookRefusal(db, { botId, platform }, reason);
      throw refusal;
    }));
    if (!row || !bot || bot.platform !== platform) throw notFound(`no ${platform} bot ${botId}`);
    // Platforms send their bodies uncompressed, signed as sent: a compressed one (a proxy's doing) would be refused as
    // badly signed, or as not JSON, and the bot's admin view would blame its credentials.
    const compressed = compressedBodyRefusal(c.req.raw.headers);
    if (compressed) throw new HostError(415, "unsupported_media_type", compressed);
    const adapter = ADAPTERS[platform];
    // Read only once the address names a bot: anyone can post to any address, and a body sent without a length
    // (chunked) would otherwise be held, up to the cap, before a 404. One outgrowing the cap is cut there, unread.
    const body = await readCapped(c.req.raw, maxBytes);
    if (body === "too_large") throw tooLarge(maxBytes);
    const rawBody = new TextDecoder().decode(body);
    // Read by this bot, or by the sibling it names when it is another installation's of the bot's app: the bot it runs as.
    const { bot: runsAs, inbound } = await receiveWebhook(db, adapter, row, bot, { headers: c.req.raw.headers, rawBody, now: Date.now(), apiTimeoutMs: config.PLATFORM_API_TIMEOUT_MS });
    if (inbound.kind === "handshake") return c.json(inbound.body);
    const recorded = await ingestEvents(
      { env: c.env, adapter, bot: runsAs, publicBaseUrl: publicBaseUrl(c.env, c.req.url), apiTimeoutMs: config.PLATFORM_API_TIMEOUT_MS, receivedAt },
      inbound,
    );
    const ack = adapter.acknowledge(recorded);
    // What the answer cannot carry (Slack's notice by a press's response_url) goes after it, never holding it up.
    const after = adapter.afterAcknowledge?.(runsAs, recorded, config.PLATFORM_API_TIMEOUT_MS);
    if (after) c.executionCtx.waitUntil(after);
    return ack === null ? c.body(null, 200) : c.json(ack);
  },
);
