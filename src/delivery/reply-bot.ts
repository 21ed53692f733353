import type { Db } from "../db/client";
import { loggedError } from "../lib/describe-error";
import { SealedSecretError } from "../lib/secret-box";
import type { ApiResult, Bot, PlatformDelivery } from "../platforms/types";
import { botsStore } from "../stores/bots";
import { ABANDONED, type CallScope } from "./recorded-call";
import { withRetries } from "./retry";

/** A bot that keeps failing to be read is logged again after this long at the most often. */
const RELOG_AFTER_MS = 60_000;
/**
 * Bots whose last read for a reply failed (per isolate): when that was last logged, and the failures since. Every
 * reply waiting on a bot asks again, backing off, for as long as a database outage lasts: one line per bot a minute,
 * and one when it is read again, not one per attempt.
 */
const failing = new Map<string, { loggedAt: number; unlogged: number }>();

function logFailure(botId: string, err: unknown): void {
  const now = Date.now();
  const seen = failing.get(botId);
  if (seen && now - seen.loggedAt < RELOG_AFTER_MS) return void seen.unlogged++;
  const since = seen ? ` (${seen.unlogged} more failures since the last line)` : "";
  console.error(`bot ${botId}: not read for a reply${since}: ${loggedError(err)}`);
  failing.set(botId, { loggedAt: now, unlogged: 0 });
}

function logRecovery(botId: string): void {
  const seen = failing.get(botId);
  if (!seen) return;
  failing.delete(botId);
  console.warn(`bot ${botId}: read for a reply again${seen.unlogged ? ` (${seen.unlogged} more failures since the last line)` : ""}`);
}

/**
 * The bot a reply is sent as, read when the reply's turn comes (a rotated
 * token is used at once). A bot gone, moved to another platform, registered
 * anew under its id since the run's event came in, or with credentials that
 * cannot be opened is final; a database failure is not.
 */
export async function loadReplyBot(db: Db, delivery: PlatformDelivery): Promise<ApiResult<Bot>> {
  const unavailable = (message: string, code = "bot_unavailable"): ApiResult<never> => ({ ok: false, failure: { kind: "permanent", status: null, code, message } });
  try {
    const bot = await botsStore(db).load(delivery.botId);
    logRecovery(delivery.botId);
    // Another registration may be another account of the platform: the reply never goes out with its credentials.
    if (bot && delivery.registeredAt !== undefined && bot.registeredAt !== delivery.registeredAt) {
      return unavailable(`bot ${delivery.botId} was deleted and registered again since this reply's event came in: not sent as the new bot`, "bot_replaced");
    }
    // A reply stored before registrations were kept: at least never sent on another platform.
    if (bot && bot.platform !== delivery.target.platform) return unavailable(`bot ${delivery.botId} is now a ${bot.platform} bot, not the ${delivery.target.platform} bot this reply belongs to`);
    return bot ? { ok: true, value: bot } : unavailable(`bot ${delivery.botId} is gone or its credentials are unusable`);
  } catch (err) {
    if (err instanceof SealedSecretError) return unavailable(`bot ${delivery.botId}'s credentials cannot be opened: ${err.message}`);
    // The failure goes to the delivery trail, which the conversation's runners read (event.page): the cause, which names
    // the statement and the database's reason, goes to the log only, as a Host API call's host fault does.
    logFailure(delivery.botId, err);
    return { ok: false, failure: { kind: "transient", status: null, code: "bot_not_loaded", message: `bot ${delivery.botId} could not be read: the database failed or did not answer` } };
  }
}

/**
 * The bot, asked for again, backing off, until a wait would pass DELIVERY_MAX_RETRY_AFTER_MS or the reply is abandoned
 * (ABANDONED), each failure recorded in the reply's trail: not for the platform calls' few attempts, as a completed
 * answer must not be lost to a database away for a few seconds.
 */
export function awaitReplyBot(db: Db, delivery: PlatformDelivery, scope: CallScope): Promise<ApiResult<Bot>> {
  return withRetries(
    { ...scope.retry, maxAttempts: Number.POSITIVE_INFINITY },
    async () => (scope.abandoned() ? ABANDONED : loadReplyBot(db, delivery)),
    ({ attempt, result, retryInMs }) => {
      if (!result.ok && result !== ABANDONED) scope.trail.append([{ type: "delivery.failed", data: { operation: "connect", attempt, code: result.failure.code, error: result.failure.message, will_retry: retryInMs !== null, retry_in_ms: retryInMs } }]);
    },
    (ms) => scope.sleep(ms),
  );
}
