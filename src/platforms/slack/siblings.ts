/**
 * One Slack app installed in several workspaces, registered as one bot per installation (each with its installation's
 * bot token and the app's one signing secret). Slack sends every installation's requests to the one Request URL the app
 * has, one bot's address; a request that bot refuses as another installation's is handed to the bot registered for
 * that one. Only to a bot whose own installation, from auth.test with its own token (never from what the request
 * says), is the one the request names, of the same app; the request is then read by it as at its own address, its own
 * signing secret verifying it again (src/routes/webhook-receive.ts).
 */
import { HostError } from "../../lib/errors";
import type { HandedOver, SiblingBot, SiblingDirectory } from "../siblings";
import type { Bot, WebhookRequest } from "../types";
import { notThisBot } from "../verify";
import type { SlackCredentials } from "./api";
import { installationKeysNamed, otherInstallation, SlackInstallationSchema, type SlackInstallation } from "./installation";
import { askedInstallation, NO_RETRY, OtherSlackInstallation, refusalHeld, SlackInstallationUnknown } from "./own-installation";

/**
 * Siblings whose installation is not known yet asked of auth.test by one request at most, at once: with the bot's own
 * auth.test before them, well inside the 3 s Slack gives the answer. A request that leaves one unasked is answered 503,
 * which Slack sends again (each time a few more are known: they are kept).
 */
const ASKED_PER_REQUEST = 2;

/** The sibling `refusal` names the installation of, if one is registered here; throws when that cannot be told now. */
export async function slackSiblingFor(bot: Bot<SlackCredentials>, refusal: unknown, req: WebhookRequest, siblings: SiblingDirectory): Promise<HandedOver | null> {
  if (!(refusal instanceof OtherSlackInstallation)) return null;
  const { named } = refusal;
  // A request naming neither workspace nor organization names no installation (refused for its kind or app alone):
  // what it leaves out must not let any sibling of that kind take it, nor cost a lookup.
  const installationKeys = installationKeysNamed(named);
  if (installationKeys.length === 0) return null;
  // One signing secret is one app: a request naming another app than this bot's was signed with a secret two apps
  // share by mistake, and goes nowhere.
  const own = SlackInstallationSchema.safeParse(await req.installation.pinned());
  if (own.success && own.data.app_id !== null && named.appId !== undefined && named.appId !== own.data.app_id) return null;
  const { bots, complete } = await siblings.sharing(bot.credentials.signing_secret, installationKeys);
  const isIt = (pinned: unknown) => {
    const installation = SlackInstallationSchema.safeParse(pinned);
    return installation.success && otherInstallation(installation.data, named) === null;
  };
  const kept = bots.filter((b) => isIt(b.pinned));
  if (kept.length > 0) return handedTo(kept);
  // Those whose token Slack refused lately (kept on their rows by a request or the cron) are not asked again yet.
  const refused = await Promise.all(bots.map(async (b) => refusalHeld(await b.installation.refusedAt())));
  const unknown = bots.filter((b, i) => !SlackInstallationSchema.safeParse(b.pinned).success && !refused[i]);
  const asked = await Promise.all(unknown.slice(0, ASKED_PER_REQUEST).map((b) => installationOf(b, req)));
  const matching = unknown.filter((_, i) => isIt(asked[i]));
  if (matching.length > 0) return handedTo(matching);
  const unanswered = unknown.filter((_, i) => asked[i] === "undecided").map((b) => b.botId);
  if (unanswered.length > 0) throw undecided(refusal, `Slack's auth.test did not say which installation bot ${unanswered.join(", ")} is`);
  if (!complete || unknown.length > ASKED_PER_REQUEST) throw undecided(refusal, "more bots of its app here than one request asks Slack about are of an installation not known yet (each time Slack sends the request again, more are asked)");
  // Perhaps the one, but it cannot be told: the refusal names them, as the operator would otherwise look at the wrong bot.
  const unusable = [...bots.filter((b) => !unknown.includes(b) && !SlackInstallationSchema.safeParse(b.pinned).success), ...unknown.filter((_, i) => asked[i] === "unusable")];
  if (unusable.length > 0) throw unaskable(refusal, unusable.map((b) => b.botId));
  return null;
}

/** A 403 as the bot's own, naming the bots of its app here whose installation could not be asked (one may be the one). */
const unaskable = (refusal: OtherSlackInstallation, botIds: string[]) =>
  new HostError(403, "forbidden", `${refusal.message}; bot ${botIds.join(", ")} of its app here could not be asked which installation it is (Slack refused its token, or its credentials cannot be read): if it is that one, PUT working credentials`, undefined, { headers: NO_RETRY });

/** A 503, which Slack sends again: whether a sibling is the installation the request names cannot be told yet. */
const undecided = (refusal: OtherSlackInstallation, why: string) =>
  new HostError(503, "platform_unavailable", `${refusal.message}; whether another bot of its app here is that installation is not known: ${why}`);

/** The one sibling of those that are the installation; two registered for one installation: neither, until one goes. */
async function handedTo(siblings: SiblingBot[]): Promise<HandedOver | null> {
  if (siblings.length > 1) throw notThisBot(`more than one bot here is the installation it names (${siblings.map((s) => s.botId).join(", ")}): delete all but one`, NO_RETRY);
  const [sibling] = siblings;
  const bot = await sibling.open();
  return bot === null ? null : { bot, installation: sibling.installation };
}

/**
 * Which installation the sibling is, asked of auth.test with its own token, and kept (a paused sibling's too: nothing
 * else tells whether it is the one). "unusable": its credentials or token cannot be used; "undecided": Slack did not say.
 */
async function installationOf(sibling: SiblingBot, req: WebhookRequest): Promise<SlackInstallation | "unusable" | "undecided"> {
  let bot: Bot | null;
  try {
    bot = await sibling.open();
  } catch {
    // Sealed under a key the host does not have (its own address answers 500 so): perhaps the one, once that is fixed.
    return "undecided";
  }
  if (bot === null) return "unusable";
  try {
    const found = await askedInstallation(bot as Bot<SlackCredentials>, req.apiTimeoutMs);
    await sibling.installation.pin(found);
    return found;
  } catch (err) {
    if (!(err instanceof SlackInstallationUnknown)) throw err;
    if (!err.permanent) return "undecided";
    // Slack refused the token itself: kept on its row as the cron keeps it, so no isolate asks again for a while, nor
    // the cron until its credentials change. Another refusal (a proxy's 4xx) is this request's alone: asked again next time.
    if (err.tokenRefused) await sibling.installation.keepRefused(Date.now());
    return "unusable";
  }
}
