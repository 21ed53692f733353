import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { bodyUnlessBrokenOff, MALFORMED_STATUS_LINE } from "./http-server";
import { callHostApi, inChunks, largeFile, uploadArtifact } from "./host-api";
import { resultWriter, startAdHocRunner } from "./runner";

export interface PlatformCall {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  /** The body parsed as JSON, or null. */
  body: any;
  raw: string;
  /** The body as sent (a multipart upload is not text). */
  bytes: Buffer;
  /** When the call arrived (ms since the epoch). */
  at: number;
  /** What the fake answered. */
  reply?: FakeReply;
}

export interface FakeReply {
  status?: number;
  headers?: Record<string, string>;
  json?: unknown;
  bytes?: Uint8Array;
  /** Take the call, then close the connection without answering (a reset, a proxy going away). */
  drop?: boolean;
  /** Answer the status and half the body, then close the connection. */
  cutBody?: boolean;
  /** Take the call, then answer a status line that is no HTTP (workerd's fetch fails with its opaque error). */
  garbled?: boolean;
}

/**
 * A chat platform's API on loopback: every call is recorded and answered by
 * `answer` (the test's model of the platform, 429s included).
 */
export async function startFakePlatform(answer: (call: PlatformCall) => FakeReply | Promise<FakeReply>) {
  const calls: PlatformCall[] = [];
  const server = createServer(async (req, res) => {
    const bytes = await bodyUnlessBrokenOff(req);
    // Broken off by the client: nothing to answer.
    if (!bytes) return;
    const raw = bytes.toString("utf8");
    const url = new URL(req.url ?? "/", "http://fake");
    let body: unknown = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      body = null;
    }
    const call: PlatformCall = { method: req.method ?? "GET", path: decodeURIComponent(url.pathname), query: url.searchParams, headers: req.headers, body, raw, bytes, at: Date.now() };
    calls.push(call);
    const reply = await answer(call);
    call.reply = reply;
    if (reply.drop) return void req.socket.destroy();
    if (reply.garbled) return void req.socket.end(MALFORMED_STATUS_LINE);
    res.writeHead(reply.status ?? 200, { "content-type": reply.bytes ? "application/octet-stream" : "application/json", ...reply.headers });
    if (reply.cutBody) {
      const body = Buffer.from(JSON.stringify(reply.json ?? {}));
      res.flushHeaders();
      res.write(body.subarray(0, body.length >> 1));
      return void setTimeout(() => req.socket.destroy(), 50);
    }
    res.end(reply.bytes ?? JSON.stringify(reply.json ?? {}));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls,
    /** Calls whose path matches, in arrival order. */
    callsTo: (pattern: RegExp) => calls.filter((c) => pattern.test(c.path)),
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** A multipart (or form-encoded) call's fields, parsed as a server would. */
export async function formOf(call: PlatformCall): Promise<FormData> {
  return new Response(call.bytes, { headers: { "content-type": String(call.headers["content-type"]) } }).formData();
}

/** A file field's bytes and name. */
export async function fileOf(form: FormData, field: string): Promise<{ name: string; type: string; bytes: Buffer }> {
  // Node's FormData, typed here by the Workers types: a file field is a File.
  const file = form.get(field) as unknown as File | string | null;
  if (file === null || typeof file === "string") throw new Error(`no file in field ${field}`);
  return { name: file.name, type: file.type, bytes: Buffer.from(await file.arrayBuffer()) };
}

/** The bytes of the file the chat runner attaches (`attach <name>`): not text, so a lossy path would show. */
export const ANSWER_FILE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe, 0x80, 0x7f, 0x01]);

/**
 * The Telegram Bot API of one bot, as a fake platform answers it: sendMessage gives a fresh message id (or, for a chat
 * in `throttled`, a 429 asking to retry after that many seconds, every time), editMessageText succeeds, another token
 * is a 401 and anything else a 404.
 */
export function telegramBotApi(botToken: string, throttled: ReadonlyMap<string, number> = new Map(), throttledOnce: Map<string, number[]> = new Map()): (call: PlatformCall) => FakeReply {
  let nextMessageId = 700;
  return (call) => {
    const file = /^\/file\/bot([^/]+)\/(.+)$/.exec(call.path);
    // A file's bytes name its path, so a test can tell which one a runner got.
    if (file?.[1] === botToken) return { bytes: new TextEncoder().encode(`bytes of ${file[2]}`), headers: { "content-type": "image/jpeg" } };
    const m = /^\/bot([^/]+)\/(.+)$/.exec(call.path);
    if (!m || m[1] !== botToken) return { status: 401, json: { ok: false, error_code: 401, description: "Unauthorized" } };
    if (m[2] === "getFile") return { json: { ok: true, result: { file_id: call.body.file_id, file_path: `photos/${call.body.file_id}.jpg` } } };
    const chat = String(call.body?.chat_id);
    // `throttledOnce`: the next sendMessages of a chat are refused, asking to wait each of these seconds in turn.
    const wait = m[2] === "sendMessage" ? (throttledOnce.get(chat)?.shift() ?? throttled.get(chat)) : undefined;
    if (wait !== undefined) return { status: 429, json: { ok: false, error_code: 429, description: `Too Many Requests: retry after ${wait}`, parameters: { retry_after: wait } } };
    if (m[2] === "sendMessage") return { json: { ok: true, result: { message_id: ++nextMessageId, chat: { id: Number(chat) }, text: call.body.text } } };
    if (m[2] === "sendDocument" || m[2] === "sendPhoto") return { json: { ok: true, result: { message_id: ++nextMessageId } } };
    if (m[2] === "editMessageText") return { json: { ok: true, result: { message_id: call.body.message_id, text: call.body.text } } };
    return { status: 404, json: { ok: false, error_code: 404, description: "Not Found" } };
  };
}

let telegramUpdateId = 100_000;
/**
 * Telegram delivering a message from Ada in `chat` to a bot's webhook (a negative chat id is a supergroup, else a private
 * chat), as its message `messageId` (the update's id unless given).
 */
export function sayOnTelegram(webhookUrl: string, secretToken: string, chat: string, text: string, messageId?: number): Promise<Response> {
  const id = ++telegramUpdateId;
  const message = { message_id: messageId ?? id, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: Number(chat) < 0 ? "supergroup" : "private" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text };
  return fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": secretToken }, body: JSON.stringify({ update_id: id, message }) });
}

/** Telegram's two service messages of a group upgraded to a supergroup: the group's last, naming the supergroup, and the supergroup's first. */
export async function upgradeOnTelegram(webhookUrl: string, secretToken: string, group: string, supergroup: string): Promise<void> {
  const date = Math.floor(Date.now() / 1000);
  const from = { id: 42, is_bot: false, first_name: "Ada" };
  const said = [
    { message_id: 900_000, date, chat: { id: Number(group), type: "group", title: "Team" }, from, migrate_to_chat_id: Number(supergroup) },
    { message_id: 1, date, chat: { id: Number(supergroup), type: "supergroup", title: "Team" }, from, migrate_from_chat_id: Number(group) },
  ];
  for (const message of said) {
    const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": secretToken }, body: JSON.stringify({ update_id: ++telegramUpdateId, message }) });
    if (res.status !== 200) throw new Error(`the upgrade's service message was answered ${res.status}`);
  }
}

/** Poll until `check` returns a value (not undefined/false) or time runs out. */
export async function waitFor<T>(check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 15_000, what = "condition"): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The runner the platform tests bind: `stream <words>` streams one word per
 * `STREAM_STEP_MS` then completes with the words (`bigstream <chunks> <chars>`
 * streams long chunks the same way); `long <n>` answers n
 * characters in lines; `differ <text>` streams a draft then completes with
 * `<text>`; `shrink [chars]` streams a draft of two messages then completes with one short line; `attach <name>` attaches ANSWER_FILE under that name (inline
 * `artifact.created`) and answers a line of text, `attachonly <name>` the same
 * with an answer that shows only an image by URL; `show <artifact_id>` answers
 * text and an image element naming that artifact (`show input` names the
 * event's first attachment); `upload <name> <bytes> [chunked]` stores
 * `largeFile(bytes)` through `artifact.upload` (`chunked`: streamed in odd-sized
 * chunks without a Content-Length) and answers text and an element naming it;
 * anything else is echoed. Every run's context is kept.
 */
export const STREAM_STEP_MS = 250;
export async function startChatRunner(name: string) {
  const contexts: any[] = [];
  const runner = await startAdHocRunner({
    name,
    runners: [{ name: "default", label: { en_US: name }, capabilities: { streaming: true }, permissions: { history: ["page"], events: ["get", "page"], artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      contexts.push(ctx);
      const text = String(ctx.input.text ?? "");
      const w = resultWriter(res, ctx.run_id);
      if (text.startsWith("stream ")) {
        const words = text.slice("stream ".length).split(" ").map((word, i) => (i ? ` ${word}` : word));
        for (const word of words) {
          w.send("message.delta", { chunk: { role: "assistant", content: word } });
          await sleep(STREAM_STEP_MS);
        }
        return w.reply(words.join(""));
      }
      if (text.startsWith("bigstream ")) {
        // `bigstream <chunks> <chars>`: long chunks, to stream past a message's size limit.
        const [chunks, chars] = text.slice("bigstream ".length).split(" ").map(Number);
        const pieces = Array.from({ length: chunks }, (_, i) => longText(chars).replace(/^line 1 /, `chunk ${i + 1} `));
        for (const piece of pieces) {
          w.send("message.delta", { chunk: { role: "assistant", content: piece } });
          await sleep(STREAM_STEP_MS);
        }
        return w.reply(pieces.join(""));
      }
      if (text.startsWith("differ ")) {
        w.send("message.delta", { chunk: { role: "assistant", content: "draft that will be replaced" } });
        await sleep(STREAM_STEP_MS);
        return w.reply(text.slice("differ ".length));
      }
      if (text.startsWith("deltasonly ")) {
        // Streamed, never completed: run.completed carries no message.
        for (const word of text.slice("deltasonly ".length).split(/(?= )/)) w.send("message.delta", { chunk: { role: "assistant", content: word } });
        w.send("run.completed", { finish_reason: "stop" });
        return void res.end();
      }
      if (text.startsWith("samefinal ")) {
        // The same message twice, as a runner may write it: keys in another order, an extra key the host strips.
        const said = text.slice("samefinal ".length);
        w.send("message.completed", { message: { content: said, role: "assistant", name: "helper" } });
        w.send("run.completed", { finish_reason: "stop", message: { role: "assistant", content: said } });
        return void res.end();
      }
      if (text.startsWith("final ")) {
        // `final <interim> | <final>`: a message, then run.completed carrying the final one (the same text: a repeat).
        const [interim, final] = text.slice("final ".length).split(" | ");
        w.send("message.completed", { message: { role: "assistant", content: interim } });
        w.send("run.completed", { finish_reason: "stop", message: { role: "assistant", content: final } });
        return void res.end();
      }
      if (text.startsWith("long ")) return w.reply(longText(Number(text.slice(5))));
      // `sleep <ms>`: a runner thinking, silent, before it answers.
      if (text.startsWith("sleep ")) await sleep(Number(text.slice("sleep ".length)));
      if (text === "shrink" || text.startsWith("shrink ")) {
        // A draft that spills into a second message, then a final answer that fits in one (`shrink <chars>`: each of
        // the draft's two deltas that long, 1500 unless given). Spaced past the 1 s edit interval, so the draft is
        // really shown in two messages.
        const chars = Number(text.slice("shrink ".length)) || 1500;
        for (const n of [1, 2]) {
          w.send("message.delta", { chunk: { role: "assistant", content: longText(chars).replace(/^line 1 /, `draft ${n} `) } });
          await sleep(1200);
        }
        return w.reply("short final");
      }
      if (text.startsWith("attach ") || text.startsWith("attachonly ")) {
        const name = text.slice(text.indexOf(" ") + 1);
        const mime = mimeOf(name);
        w.send("artifact.created", { artifact_type: mime.startsWith("image/") ? "image" : "file", mime_type: mime, name, content_base64: ANSWER_FILE.toString("base64") });
        if (text.startsWith("attachonly ")) return w.reply([{ type: "image", url: "https://example.com/elsewhere.png" }]);
        return w.reply(`here is ${name}`);
      }
      if (text.startsWith("attachas ")) {
        // `attachas <mime> [name]`: a file of that type, named as given or not at all.
        const [mime, name] = text.slice("attachas ".length).split(" ");
        w.send("artifact.created", { artifact_type: mime.startsWith("image/") ? "image" : "file", mime_type: mime, ...(name ? { name } : {}), content_base64: ANSWER_FILE.toString("base64") });
        return w.reply(`here is a ${mime}`);
      }
      if (text.startsWith("show ")) {
        const named = text.slice("show ".length);
        const artifactId = named === "input" ? ctx.input.attachments[0]?.artifact_id : named;
        return w.reply([{ type: "text", text: `showing ${named}` }, { type: "image", artifact_id: artifactId }]);
      }
      if (text.startsWith("upload ")) {
        const [file, size, how] = text.slice("upload ".length).split(" ");
        const mime = mimeOf(file);
        const query = { name: file, mime_type: mime, artifact_type: mime.startsWith("image/") ? "image" : "file" };
        const bytes = largeFile(Number(size));
        const body = how === "chunked" ? inChunks(bytes) : bytes;
        const up = await uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, body, query);
        if (!up.body.ok) throw new Error(`upload refused: ${JSON.stringify(up.body.error)}`);
        const element = mime.startsWith("image/") ? { type: "image", artifact_id: up.body.data.artifact_id } : { type: "file", artifact_id: up.body.data.artifact_id, name: file };
        return w.reply([{ type: "text", text: `here is ${file}` }, element]);
      }
      if (text.startsWith("rawref ")) {
        // The raw payload's name as the run was handed it, and as event.get gives it back (none: absent or null).
        const got = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "event.get", { event_id: ctx.event.event_id });
        return w.reply(JSON.stringify({ context: ctx.event.raw_ref ?? null, eventGet: got.body.ok ? (got.body.data.raw_ref ?? null) : got.body.error }));
      }
      if (text === "fail") {
        w.send("run.failed", { code: "runner.crashed", error: "the runner gave up", retryable: false });
        res.end();
        return;
      }
      w.reply(`echo: ${text || "(no text)"}`);
    },
  });
  return { ...runner, contexts };
}

const mimeOf = (name: string) => (name.endsWith(".png") ? "image/png" : name.endsWith(".svg") ? "image/svg+xml" : "application/pdf");

/** n characters of numbered lines, so a split shows where it cut. */
export function longText(n: number): string {
  let out = "";
  for (let i = 1; out.length < n; i++) out += `line ${i} ${"abcdefghij".repeat(5)}\n`;
  return out.slice(0, n);
}

/** Every write to one message is at least `gapMs` after the previous one (small clock tolerance). */
export function gapsBetween(times: number[]): number[] {
  return times.slice(1).map((t, i) => t - times[i]);
}

/**
 * A Telegram bot registered on `apiBaseUrl` (a fake Bot API), and, with `agent`, an agent of `runner` bound to it at
 * bot scope: what a chat test starts from.
 */
export async function addTelegramBot(
  host: { admin: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>; bind: (opts: { baseUrl: string; runnerId: string; agentId: string; scope?: { type: string; id?: string }; eventTypes?: string[] }) => Promise<boolean> },
  bot: { apiBaseUrl: string; botToken: string; secretToken: string; name?: string; workspaceId?: string },
  agent?: { runner: { url: string; runnerId: () => string }; agentId: string; eventTypes?: string[] },
): Promise<{ botId: string; webhookUrl: string }> {
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", ...(bot.name ? { name: bot.name } : {}), ...(bot.workspaceId ? { workspace_id: bot.workspaceId } : {}), api_base_url: bot.apiBaseUrl, credentials: { bot_token: bot.botToken, secret_token: bot.secretToken } });
  if (created.status !== 201) throw new Error(`registering the Telegram bot: ${created.status} ${JSON.stringify(created.body)}`);
  const botId: string = created.body.bot_id;
  if (agent) await host.bind({ baseUrl: agent.runner.url, runnerId: agent.runner.runnerId(), agentId: agent.agentId, scope: { type: "bot", id: botId }, ...(agent.eventTypes ? { eventTypes: agent.eventTypes } : {}) });
  return { botId, webhookUrl: created.body.webhook_url };
}
