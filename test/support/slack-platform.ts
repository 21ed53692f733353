import { createHmac } from "node:crypto";
import { useChatHost } from "./chat-host";
import type { FakeReply, PlatformCall } from "./fake-platform";
import { SLACK_AUTH_TEST } from "./slack-events";

/**
 * The set-up the platform-slack*.test.ts files share: a fake Slack Web API (its refusals driven by the sets and maps
 * returned) and a host with one bot bound to a chat runner. Call it once at a file's top level: it registers the file's
 * beforeAll and afterAll, and each call has its own state. `hostOptions`: what its host starts with besides (a drill).
 */
export function useSlackPlatform(hostOptions: { storageDrill?: boolean; vars?: Record<string, string> } = {}) {
  /** Values tests change as well as read: the last message ts handed out, where Slack's file host sends F10. */
  const state = { messageTs: 1_800_000_000, fileMovedTo: null as string | null };
  const BOT_TOKEN = "xoxb-TEST-slack-bot-token-1234567890";
  const SIGNING_SECRET = "slack-signing-secret-0123456789abcdef";
  const FILE = new Uint8Array([0x25, 0x50, 0x44, 0x46, 9, 8, 7]);
  /** Channels whose first chat.postMessage the fake answers 429 with Retry-After: 1. */
  const throttledChannels = new Set<string>();
  /** Channels whose first chat.postMessage the fake answers `internal_error`: Slack says the post may have happened anyway. */
  const failingChannels = new Set<string>();
  /** Channels archived while their runs went on: Slack refuses every post there with `is_archived`. */
  const archivedChannels = new Set<string>();
  /** A channel id and an error name as a forger would write them: each would start a log line that reads as the host's. */
  const FORGED_LINE = "run run_forged: completed";
  const FORGED_CHANNEL = `CFORGED\n${FORGED_LINE}`;
  /** A channel whose posts are refused with the bot token quoted in the error name. */
  const ECHO_CHANNEL = "C-ECHO";

  let ts = 1_700_000_000;

  let uploads = 0;
  /** Files (by name) whose first files.getUploadURLExternal, or first bytes upload, loses its connection before an answer. */
  const cutAsk = new Set<string>();
  const cutBytes = new Set<string>();
  const uploadNames = new Map<string, string>();
  function slackApi(call: PlatformCall): FakeReply | Promise<FakeReply> {
    // Upload URLs are Slack's own pre-signed ones: the bot token has no business there.
    if (call.path.startsWith("/upload/") && cutBytes.delete(uploadNames.get(call.path.split("/").pop()!)!)) return { drop: true };
    if (call.path.startsWith("/upload/")) return call.headers.authorization ? { status: 400, json: {} } : { json: {} };
    // An upload URL that has moved: a 307 keeps the method and the body, as an HTTP client follows it.
    if (call.path.startsWith("/upload-moved/")) return { status: 307, headers: { location: `${chatHost.fake.url}/upload/${call.path.split("/").pop()}` }, json: {} };
    if (call.headers.authorization !== `Bearer ${BOT_TOKEN}`) return { json: { ok: false, error: "invalid_auth" } };
    // Who the bot token is: the workspace T1 each envelope names (the host pins the bot to it).
    if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
    if (call.path === "/files/F1/report.pdf") return { bytes: FILE, headers: { "content-type": "application/pdf" } };
    // A file Slack's file host sends elsewhere (a CDN): the token must not follow it there.
    if (call.path === "/files/F10/moved.pdf" && state.fileMovedTo) return { status: 302, headers: { location: state.fileMovedTo }, json: {} };
    // What Slack answers for a file its token may not read (no files:read scope): its sign-in page.
    if (call.path === "/files/F3/contract.pdf") return { bytes: Buffer.from("<!DOCTYPE html><html><body>Sign in to Slack</body></html>"), headers: { "content-type": "text/html; charset=utf-8" } };
    if (call.path === "/chat.postMessage") {
      if (throttledChannels.delete(call.body.channel)) return { status: 429, headers: { "retry-after": "1" }, json: { ok: false, error: "ratelimited" } };
      if (failingChannels.delete(call.body.channel)) return { json: { ok: false, error: "internal_error" } };
      if (archivedChannels.has(call.body.channel)) return { json: { ok: false, error: "is_archived" } };
      // A crafted channel, refused with an error name that holds a line break too: both reach the host's log lines.
      // A proxy at the bot's api_base_url answering with what it was asked: the token as Slack's error name.
      if (call.body.channel === ECHO_CHANNEL) return { json: { ok: false, error: `invalid_auth:${call.headers.authorization}` } };
      if (String(call.body.channel).startsWith(FORGED_CHANNEL)) return { json: { ok: false, error: `channel_not_found\n${FORGED_LINE}` } };
      return { json: { ok: true, channel: call.body.channel, ts: `${++ts}.000100` } };
    }
    if (call.path === "/files.getUploadURLExternal") {
      const filename = new URLSearchParams(call.raw).get("filename")!;
      if (cutAsk.delete(filename)) return { drop: true };
      const id = `F${++uploads}UP`;
      uploadNames.set(id, filename);
      const moved = filename === "moved.png";
      return { json: { ok: true, upload_url: `${chatHost.fake.url}/${moved ? "upload-moved" : "upload"}/${id}`, file_id: id } };
    }
    if (call.path === "/files.completeUploadExternal") return { json: { ok: true, files: JSON.parse(new URLSearchParams(call.raw).get("files") ?? "[]") } };
    if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
    if (call.path === "/conversations.replies") {
      const asked = new URLSearchParams(call.raw);
      // An app given no channels:history scope: Slack names the one it needs.
      if (unscopedChannels.has(asked.get("channel")!)) return { json: { ok: false, error: "missing_scope", needed: "channels:history", provided: "app_mentions:read,chat:write" } };
      // A parent Slack fails to give once (its first read answers `internal_error`), then gives; `then` runs as it fails.
      const failOnce = failingParents.get(asked.get("ts")!);
      if (failOnce) {
        failingParents.delete(asked.get("ts")!);
        failOnce();
        return { json: { ok: false, error: "internal_error" } };
      }
      const parent = threadParents.get(asked.get("ts")!);
      const answer: FakeReply = parent ? { json: { ok: true, messages: [parent], has_more: true } } : { json: { ok: false, error: "thread_not_found" } };
      const slow = slowParents.get(asked.get("ts")!);
      return slow === undefined ? answer : new Promise((resolve) => setTimeout(() => resolve(answer), slow));
    }
    return { status: 404, json: { ok: false, error: "unknown_method" } };
  }
  /** Thread parents conversations.replies gives, by their `ts`; channels where the app lacks the scope to read them. */
  const threadParents = new Map<string, Record<string, unknown>>();
  const unscopedChannels = new Set<string>();
  /** Thread parents conversations.replies answers only after this many ms, by their `ts`. */
  const slowParents = new Map<string, number>();
  /** Thread parents whose next read Slack answers `internal_error`, by their `ts`, with what the test does meanwhile. */
  const failingParents = new Map<string, () => void>();

  const chatHost = useChatHost({
    api: slackApi,
    runnerName: "slack-chat",
    hostOptions,
    secrets: [BOT_TOKEN, SIGNING_SECRET, "legacy-verification-token"],
    async ready() {
      await chatHost.addBot({ platform: "slack", workspace_id: "acme", api_base_url: chatHost.fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } }, { agentId: "slack-agent" });
    },
  });
  const { answered } = chatHost;

  const sign = (timestamp: number, body: string, secret = SIGNING_SECRET) => `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;

  async function post(payload: unknown, opts: { timestamp?: number; signature?: string; headers?: Record<string, string> } = {}) {
    const body = JSON.stringify(payload);
    const timestamp = opts.timestamp ?? Math.floor(Date.now() / 1000);
    const res = await fetch(chatHost.webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": opts.signature ?? sign(timestamp, body), ...opts.headers },
      body,
    });
    const text = await res.text();
    answered.push(text);
    return { status: res.status, text };
  }

  let eventSeq = 0;
  /** The bot's own user, as each envelope's `authorizations` names it. */
  const BOT_USER = "UBOT";
  function callback(event: Record<string, unknown>, eventId = `Ev${++eventSeq}TEST`) {
    const authorizations = [{ enterprise_id: null, team_id: "T1", user_id: BOT_USER, is_bot: true, is_enterprise_install: false }];
    return { token: "legacy-verification-token", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: eventId, event_time: Math.floor(Date.now() / 1000), authorizations, event };
  }
  const message = (channel: string, text: string, extra: Record<string, unknown> = {}) => ({ type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++state.messageTs}.000200`, team: "T1", ...extra });

  const postsTo = (channel: string) => chatHost.fake.callsTo(/^\/chat\.postMessage$/).filter((c) => c.body.channel === channel);
  const updatesIn = (channel: string) => chatHost.fake.callsTo(/^\/chat\.update$/).filter((c) => c.body.channel === channel);
  /** The delivery records of an answer's files, in order. */
  async function fileRecords(runId: string) {
    const rows = await chatHost.host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
    return rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) })).filter((r) => r.operation === "send_file");
  }

  return Object.assign(chatHost, {
    state, BOT_TOKEN, SIGNING_SECRET, FILE, FORGED_LINE, FORGED_CHANNEL, ECHO_CHANNEL, BOT_USER,
    throttledChannels, failingChannels, archivedChannels, cutAsk, cutBytes, uploadNames, threadParents, unscopedChannels, slowParents, failingParents,
    sign, post, callback, message, postsTo, updatesIn, fileRecords,
  });
}
export type SlackPlatform = ReturnType<typeof useSlackPlatform>;
