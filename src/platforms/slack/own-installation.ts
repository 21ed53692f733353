/**
 * The Slack installation a bot is, from Slack itself: auth.test with the bot's own token says its workspace (team),
 * its organization and whether it is installed org-wide, never trusting what a request says. Asked once, when the
 * bot's webhook is first called with a verified request (a bot registered before this was kept too), or when a request
 * of its app reaches a sibling's address (./siblings.ts), or ahead of both by the cron
 * (src/retention/slack-installations.ts), and kept on its row until its credentials change
 * (src/stores/bot-installation.ts). auth.test names the app only for some tokens:
 * else the app is learned from the first request found to be of the bot's own installation (one signing secret is
 * one app, so this only guards against a secret shared by mistake).
 */
import { HostError } from "../../lib/errors";
import { loggedText } from "../../lib/log-text";
import { scrubSecrets } from "../redact";
import type { Bot, WebhookRequest } from "../types";
import { notThisBot } from "../verify";
import { slackCall, type SlackCredentials } from "./api";
import { otherInstallation, SlackInstallationSchema, type NamedInstallation, type SlackInstallation } from "./installation";

/** Well inside the 3 s Slack gives the webhook's answer, with the request's recording still to come. */
const AUTH_TEST_TIMEOUT_MS = 1_000;

/** Slack sends a refused event again three times; a retry names the same installation, and would be refused again. */
export const NO_RETRY = { "x-slack-no-retry": "1" };

/** A request Slack signed for another installation than the bot's: refused, unless a sibling is that one (./siblings.ts). */
export class OtherSlackInstallation extends HostError {
  constructor(
    why: string,
    readonly named: NamedInstallation,
  ) {
    super(403, "forbidden", notThisBot(why).message, undefined, { headers: NO_RETRY });
  }
}

/**
 * Slack did not say which installation a bot token is. `permanent`: the failure is not one to try again soon (Slack
 * refused the call, or something in front of it did: a 4xx). `tokenRefused`: Slack itself refused the token (revoked,
 * invalid, expired), which only new credentials change; a proxy's 403 or a workspace moving into an organization do not.
 */
export class SlackInstallationUnknown extends HostError {
  constructor(
    message: string,
    readonly permanent: boolean,
    readonly tokenRefused = false,
  ) {
    super(503, "platform_unavailable", message);
  }
}

/** auth.test's errors (as slackCall codes them) that refuse the token itself: asked again with it, Slack refuses it again. */
const TOKEN_REFUSED = new Set(["slack_not_authed", "slack_invalid_auth", "slack_account_inactive", "slack_token_revoked", "slack_token_expired"]);

/**
 * How long a request (at the bot's own address, or a sibling's lookup) does not ask again about a token Slack refused
 * (the cron waits for new credentials). Not for good: Slack's `invalid_auth` also answers a token just issued, for a
 * while, and a call from an address the app's token IP restrictions leave out, fixed in Slack with the token as it was.
 */
export const REFUSED_TOKEN_HELD_MS = 10 * 60_000;

/** Whether a refusal kept at `refusedAt` (null: none) still stands for requests. */
export const refusalHeld = (refusedAt: number | null): boolean => refusedAt !== null && Date.now() - refusedAt < REFUSED_TOKEN_HELD_MS;

/**
 * Refuses a request naming an installation other than the bot's (403, which Slack is told not to retry). A paused bot
 * whose installation is not known yet takes the request unchecked: a paused bot calls no Slack API, and its events
 * start nothing. Throws a 503 when Slack cannot say which installation the bot is (Slack sends an event again).
 */
export async function checkSlackInstallation(bot: Bot<SlackCredentials>, req: WebhookRequest, named: NamedInstallation): Promise<void> {
  // Nothing to compare (a slash command's ssl_check names no workspace, and asks for nothing): Slack is not asked.
  if (named.teamId === undefined && named.enterpriseId === undefined && named.appId === undefined) return;
  const kept = SlackInstallationSchema.safeParse(await req.installation.pinned());
  if (!kept.success && !bot.enabled) return;
  const own = kept.success ? kept.data : await installationAsked(bot, req);
  const why = otherInstallation(own, named);
  const learned = why === null && own.app_id === null && named.appId !== undefined ? { ...own, app_id: named.appId } : own;
  if (!kept.success || learned !== own) await req.installation.pin(learned);
  if (why !== null) throw new OtherSlackInstallation(why, named);
}

/**
 * The bot's installation asked of Slack, unless Slack refused its token (revoked, invalid) less than
 * REFUSED_TOKEN_HELD_MS ago, at a request or the cron. A refusal met here is kept so, for the next isolates and the cron.
 */
export async function installationAsked(bot: Bot<SlackCredentials>, req: WebhookRequest): Promise<SlackInstallation> {
  const refusedAt = await req.installation.refusedAt();
  if (refusedAt !== null && refusalHeld(refusedAt)) throw tokenRefusedBefore(refusedAt);
  try {
    return await askedInstallation(bot, req.apiTimeoutMs);
  } catch (err) {
    if (err instanceof SlackInstallationUnknown && err.tokenRefused) await req.installation.keepRefused(Date.now());
    throw err;
  }
}

/** A 503 as Slack's refusal was: whether the request is the bot's cannot be told until Slack is asked again. */
const tokenRefusedBefore = (at: number) =>
  new SlackInstallationUnknown(`Slack refused the bot token when asked which workspace it is installed in (auth.test, at ${new Date(at).toISOString()}), so the request could not be checked: it is not asked again before ${new Date(at + REFUSED_TOKEN_HELD_MS).toISOString()}, unless the bot's credentials change (PUT a working token)`, true, true);

/** auth.test's answer within `timeoutMs` (at most AUTH_TEST_TIMEOUT_MS), or a 503 naming why there is none (never the token). */
export async function askedInstallation(bot: Bot<SlackCredentials>, timeoutMs: number): Promise<SlackInstallation> {
  const res = await slackCall(bot, "auth.test", {}, Math.min(timeoutMs, AUTH_TEST_TIMEOUT_MS));
  const unavailable = (why: string, permanent: boolean, tokenRefused = false) =>
    new SlackInstallationUnknown(`Slack's auth.test did not say which workspace the bot token is installed in (${loggedText(scrubSecrets(why, bot.credentials))}), so the request could not be checked: it is refused until Slack answers`, permanent, tokenRefused);
  if (!res.ok) throw unavailable(res.failure.message, res.failure.kind === "permanent", TOKEN_REFUSED.has(res.failure.code));
  const { team_id: team, enterprise_id: enterprise, is_enterprise_install: orgWide, app_id: app } = res.value;
  const id = (v: unknown) => (typeof v === "string" && v !== "" ? v : null);
  const found: SlackInstallation = { team_id: id(team), enterprise_id: id(enterprise), enterprise_install: orgWide === true, app_id: id(app) };
  if (found.enterprise_install ? found.enterprise_id === null : found.team_id === null) throw unavailable(found.enterprise_install ? "it named no enterprise_id" : "it named no team_id", false);
  return found;
}
