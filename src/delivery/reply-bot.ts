import type { Db } from "../db/client";
import { describeError } from "../lib/describe-error";
import { SealedSecretError } from "../lib/secret-box";
import type { ApiResult, Bot, PlatformDelivery } from "../platforms/types";
import { botsStore } from "../stores/bots";

/**
 * The bot a reply is sent as, read when the reply's turn comes (a rotated
 * token is used at once). A bot gone, moved to another platform or with credentials
 * that cannot be opened is final; a database failure is not.
 */
export async function loadReplyBot(db: Db, delivery: PlatformDelivery): Promise<ApiResult<Bot>> {
  const unavailable = (message: string): ApiResult<never> => ({ ok: false, failure: { kind: "permanent", status: null, code: "bot_unavailable", message } });
  try {
    const bot = await botsStore(db).load(delivery.botId);
    if (bot && bot.platform !== delivery.target.platform) return unavailable(`bot ${delivery.botId} is now a ${bot.platform} bot, not the ${delivery.target.platform} bot this reply belongs to`);
    return bot ? { ok: true, value: bot } : unavailable(`bot ${delivery.botId} is gone or its credentials are unusable`);
  } catch (err) {
    if (err instanceof SealedSecretError) return unavailable(`bot ${delivery.botId}'s credentials cannot be opened: ${err.message}`);
    // The failure goes to the delivery trail, which the conversation's runners read (event.page): the cause, which names
    // the statement and the database's reason, goes to the log only, as a Host API call's host fault does.
    console.error(`bot ${delivery.botId}: not read for a reply: ${describeError(err)}`);
    return { ok: false, failure: { kind: "transient", status: null, code: "bot_not_loaded", message: `bot ${delivery.botId} could not be read: the database failed or did not answer` } };
  }
}
