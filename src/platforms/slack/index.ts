import * as z from "zod";
import { HostError } from "../../lib/errors";
import { withoutKeys } from "../redact";
import type { PlatformAdapter } from "../types";
import { bodyKey, unhandledEvent } from "../unhandled";
import { parseBody } from "../verify";
import { slackMessenger, type SlackCredentials } from "./api";
import { SLACK_TABLE_COLUMNS } from "./mrkdwn";
import { isInteractivity, namedByForm, parseForm, readInteractivity } from "./interactivity";
import { installationKeyOf, installationShown, namedByEnvelope, SlackInstallationSchema } from "./installation";
import { checkSlackInstallation } from "./own-installation";
import { slackSiblingFor } from "./siblings";
import { asRecord } from "../http";
import { acknowledgeSlack, noticeByResponseUrl } from "./acknowledge";
import { ephemeralMessenger } from "./ephemeral";
import { EnvelopeSchema, normalizeEnvelope } from "./normalize";
import { SLACK_MAX_TEXT, slackSentUnits } from "./text";
import { readSlackThreadParent, recordedSlackThreadParent } from "./thread-parent";
import { verifySlackSignature } from "./verify";

const CredentialsSchema = z.strictObject({
  bot_token: z.string().regex(/^xox[a-z]-[A-Za-z0-9-]+$/, "bot_token must be a Slack token (xoxb-...)"),
  signing_secret: z.string().min(16).max(256),
});

/**
 * New credentials take a bot token only: a user token (xoxp-) posts as its user, and its posts cannot be told from
 * that person's own made through the app (normalize.ts posterOf), so the bot would answer itself. Only for new ones: a bot stored before keeps working until its credentials are replaced.
 */
const NewCredentialsSchema = CredentialsSchema.extend({
  bot_token: z.string().regex(/^xoxb-[A-Za-z0-9-]+$/, "bot_token must be a Slack bot token (xoxb-...)"),
});

/**
 * Slack Events API over HTTP: every request signed with the app's signing
 * secret, and for the bot's own installation of the app (its workspace and
 * app: ./own-installation.ts), else handed to the bot registered for the one it names (./siblings.ts);
 * `url_verification` answered with its challenge; retries
 * (`X-Slack-Retry-Num`) carry the same event and are deduplicated. Interactivity
 * requests (button presses, shortcuts) and slash commands come to the same URL, form-encoded (./interactivity.ts).
 */
/** Slack's upload URLs take files of up to 1 GB. */
const SLACK_UPLOAD_MAX_BYTES = 1_000_000_000;

export const slack: PlatformAdapter<SlackCredentials> = {
  name: "slack",
  credentials: CredentialsSchema,
  newCredentials: NewCredentialsSchema,
  defaultApiBaseUrl: "https://slack.com/api",
  // Counted as sent: the escaped text, which its mrkdwn does not outgrow (./mrkdwn.ts). chat.update edits in place.
  surface: { canEdit: true, maxMessageSize: SLACK_MAX_TEXT, tableColumns: SLACK_TABLE_COLUMNS, sentUnits: slackSentUnits, maxFileBytes: SLACK_UPLOAD_MAX_BYTES, capabilities: { threads: "thread_ts" } },
  ackDeadlineMs: 3_000,

  async receive(bot, req) {
    await verifySlackSignature(req.headers, req.rawBody, bot.credentials.signing_secret, req.now);
    const fallbackKey = await bodyKey(req.rawBody);
    // Button presses, shortcuts and slash commands come form-encoded, signed the same way (their Request URLs).
    if (isInteractivity(req.headers, req.rawBody)) {
      const form = parseForm(req.rawBody);
      // Signed for this app, but perhaps for its installation in another workspace (./own-installation.ts).
      await checkSlackInstallation(bot, req, namedByForm(form));
      return readInteractivity(form, fallbackKey);
    }
    const body = parseBody(req.rawBody);
    const envelope = EnvelopeSchema.safeParse(body);
    // The URL's challenge names no installation, and asks for nothing but itself.
    if (envelope.success && envelope.data.type === "url_verification") return { kind: "handshake", body: { challenge: envelope.data.challenge ?? "" } };
    await checkSlackInstallation(bot, req, namedByEnvelope(asRecord(body)));
    if (!envelope.success) return { kind: "events", raw: body, events: [unhandledEvent(fallbackKey, "unknown")] };
    // A bot stored with a user token (before bot tokens were required) posts as that user.
    const postsAsUser = !bot.credentials.bot_token.startsWith("xoxb-");
    // The payload as parsed, not as the schema rebuilt it: the stored copy keeps Slack's own key order.
    return { kind: "events", raw: body, events: normalizeEnvelope(envelope.data, fallbackKey, postsAsUser) };
  },

  // One app installed in several workspaces calls one Request URL: a request for another installation than the bot's
  // goes to the bot registered for that one, found by the app's signing secret (./siblings.ts).
  appSecret: (credentials) => credentials.signing_secret,
  installationKey: (kept) => {
    const installation = SlackInstallationSchema.safeParse(kept);
    return installation.success ? installationKeyOf(installation.data) : null;
  },
  installationShown,
  siblingFor: slackSiblingFor,

  // Slack wants a 2xx within 3 s: empty but for a slash command's (./acknowledge.ts).
  acknowledge: acknowledgeSlack,
  afterAcknowledge: noticeByResponseUrl,

  // A thread's reply answers its parent: read as Lark reads a reply's message (../replied.ts). Whether it addresses the
  // bot its event tells already (`parent_user_id`), so the parent is not read for a reply left unanswered.
  readReplied: readSlackThreadParent,
  recordedReplied: recordedSlackThreadParent,
  addressedWithoutReplied: true,
  // Its own answer as a parent read from Slack names it (./thread-parent.ts: a bot's post is its bot user's), when the
  // envelope names the bot user; unknown otherwise.
  ownActor: (_bot, event) => (event.ownUserId === undefined ? null : { actor_type: "bot", actor_id: event.ownUserId, actor_name: null }),

  async download(bot, file) {
    if (!file.ref) throw new HostError(400, "attachment_unavailable", "Slack gave no download URL for it (a Slack Connect file, or one the workspace's plan hides)");
    // Private file URLs need the bot token, but only Slack's own file host (or the configured API origin) gets
    // it: a payload naming another URL must not make the host hand its token away. Never stored either way.
    const trusted = isTrustedFileUrl(file.ref, bot.apiBaseUrl);
    const headers = trusted ? { authorization: `Bearer ${bot.credentials.bot_token}` } : undefined;
    return { kind: "url", url: file.ref, headers, name: file.name, mimeType: file.mimeType, artifactType: file.artifactType };
  },

  // The deprecated verification `token` is a credential; so is a slash command's or interactivity payload's `response_url` (it posts in
  // the chat for 30 minutes, no token needed), a view's `response_urls`, a workflow step's `bot_access_token`, and a user
  // context's `secret` (what vouches for `{id, secret}`: a function's `inputs`, an interactivity's `interactor`). Removed
  // wherever they are: a function's inputs nest as its workflow defines them (event.inputs, function_data.inputs).
  redactRaw: (raw) => withoutKeys(raw, SLACK_SECRET_KEYS),
  messenger: (bot, target, timeoutMs, opts) => {
    if (target.platform !== "slack") throw new Error("not a Slack target");
    // A press on an ephemeral message is answered to its user alone (./ephemeral.ts).
    return target.ephemeral ? ephemeralMessenger(bot, target, timeoutMs, opts?.format ?? "markdown") : slackMessenger(bot, target, timeoutMs, opts?.format);
  },
  // Slack edits no ephemeral message: that answer is posted whole, never streamed. It takes no file either (an upload
  // is shared with the whole channel): ctx.delivery says 0 bytes, and a file is refused before any call.
  surfaceAt: (t) => (t.platform === "slack" && t.ephemeral ? { canEdit: false, maxFileBytes: 0 } : {}),
  replyTargetView: (t) => (t.platform === "slack" ? { channel: t.channel, thread_ts: t.threadTs } : {}),
};

/** The names of the fields that carry a Slack credential, at any depth of a payload (redactRaw). */
const SLACK_SECRET_KEYS = ["token", "response_url", "response_urls", "bot_access_token", "secret"];

const SLACK_FILE_ORIGIN = "https://files.slack.com";

function isTrustedFileUrl(url: string, apiBaseUrl: string): boolean {
  try {
    const origin = new URL(url).origin;
    return origin === SLACK_FILE_ORIGIN || origin === new URL(apiBaseUrl).origin;
  } catch {
    return false;
  }
}
