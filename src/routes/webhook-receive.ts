/**
 * A webhook request read by the bot it was sent to or, when that bot refuses it as another installation's of its app,
 * by the sibling registered for that installation (PlatformAdapter.siblingFor: Slack calls one Request URL per app),
 * exactly as at that sibling's own address: its signing secret and installation check it again, and it is the bot the
 * request runs as (its agents, conversations, token, notes, pause). A refusal an operator may have to fix is logged
 * and noted on the bot that refused it.
 */
import type { Db } from "../db/client";
import { HostError } from "../lib/errors";
import type { Bot, Inbound, PlatformAdapter, WebhookRequest } from "../platforms/types";
import { webhookInstallation } from "../stores/bot-installation";
import { noteWebhookRefusal } from "../stores/bot-notes";
import { siblingDirectory } from "../stores/bot-siblings";
import type { BotRow } from "../stores/bots";
import { logWebhookRefused } from "./webhook-refused-log";

/**
 * What an operator may have to fix, logged and noted on the bot: a request not proven the platform's (401), one the
 * platform signed for another bot (403), or one that could not be checked because the platform did not say which
 * installation the bot is (503).
 */
const isNotedRefusal = (err: unknown): err is HostError => err instanceof HostError && (err.status === 401 || err.status === 403 || err.code === "platform_unavailable");

export async function receiveWebhook(db: Db, adapter: PlatformAdapter, row: BotRow, bot: Bot, request: Omit<WebhookRequest, "installation">): Promise<{ bot: Bot; inbound: Inbound }> {
  const req = { ...request, installation: webhookInstallation(db, row) };
  let refusal: unknown;
  try {
    return { bot, inbound: await adapter.receive(bot, req) };
  } catch (err) {
    refusal = err;
  }
  const sibling = adapter.siblingFor ? await adapter.siblingFor(bot, refusal, req, siblingDirectory(db, row)).catch((err: unknown) => noted(db, bot, err)) : null;
  if (!sibling) return noted(db, bot, refusal);
  try {
    return { bot: sibling.bot, inbound: await adapter.receive(sibling.bot, { ...request, installation: sibling.installation }) };
  } catch (err) {
    // Its own secret does not verify the request (the digest it was found by was of another): not its request.
    if (err instanceof HostError && err.status === 401) return noted(db, bot, refusal);
    return noted(db, sibling.bot, err);
  }
}

async function noted(db: Db, bot: Bot, err: unknown): Promise<never> {
  // The reason helps an operator fix a misconfigured bot (in the log and on the bot's admin view); it never includes a secret.
  if (isNotedRefusal(err)) {
    logWebhookRefused(bot, { status: err.status, code: err.code, reason: err.message });
    await noteWebhookRefusal(db, bot, err.message);
  }
  throw err;
}
