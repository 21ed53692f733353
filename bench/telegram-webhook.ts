/**
 * The platform ingress side of `host_overhead`: Telegram updates through the host's webhook, from a fake Bot API on
 * loopback, to the same runner as the API's events. Supergroup chats (`-100…`: each message asks the chat-alias
 * lookup, cached per isolate), and among the messages some replies: to the chat's photo received before (the stored
 * reply's files re-used: one read) and to the bot's last answer. The window measured is the API path's first one:
 * webhook request sent → the runner receives the run request; the run then followed to its end and its answer's
 * sendMessage, so no event measures another's tail work.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { adminCall } from "../local/setup";
import type { LocalHost } from "../local/host";
import { TEXT_KEYED, untilEnd, type BenchRunner } from "./bench-runner";

/** Supergroups the updates spread over (fewer than the API's conversations: a group chat is busier than one API conversation). */
const CHATS = 20;
const BOT_TOKEN = "123456:bench-telegram-bot-token";
const SECRET_TOKEN = "bench-telegram-secret-token";
const BOT_USER = { id: 123456, is_bot: true, first_name: "Bench", username: "BenchBot" };
const USER = { id: 777, is_bot: false, first_name: "Ada" };

const chatIdOf = (k: number) => -1001000000000 - k;

/** A fake Bot API that answers what delivery and ingress ask, and tells the bench when an answer was sent to a chat. */
async function startFakeBotApi() {
  let nextMessageId = 100_000;
  const sent = new Map<number, (s: { at: number; messageId: number }) => void>();
  const server = createServer(async (req, res) => {
    let raw = "";
    for await (const c of req) raw += c;
    const path = decodeURIComponent(new URL(req.url ?? "/", "http://fake").pathname);
    if (path.startsWith(`/file/bot${BOT_TOKEN}/`)) return void res.writeHead(200, { "content-type": "image/jpeg" }).end(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4]));
    const method = path.slice(`/bot${BOT_TOKEN}/`.length);
    const body = raw ? JSON.parse(raw) : {};
    const ok = (result: unknown) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, result }));
    if (method === "getMe") return ok(BOT_USER);
    if (method === "getFile") return ok({ file_id: body.file_id, file_path: `photos/${body.file_id}.jpg` });
    if (method === "sendMessage") {
      const messageId = ++nextMessageId;
      ok({ message_id: messageId, chat: { id: body.chat_id }, text: body.text });
      sent.get(Number(body.chat_id))?.({ at: performance.now(), messageId });
      return;
    }
    return ok(true);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const answerIn = (chatId: number) => new Promise<{ at: number; messageId: number }>((resolve) => sent.set(chatId, resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, answerIn, close: () => server.close() };
}

export async function startTelegramIngress(host: LocalHost, runner: BenchRunner) {
  const api = await startFakeBotApi();
  const created = await adminCall<{ bot_id: string; webhook_url: string }>(host, "POST", "/v1/admin/bots", { platform: "telegram", api_base_url: api.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
  if (created.status !== 201) throw new Error(`registering the bench's Telegram bot: ${JSON.stringify(created.body)}`);
  const webhookUrl = created.body.webhook_url;
  let updateId = 1;
  let messageId = 1;
  const chats = Array.from({ length: CHATS }, (_, k) => ({ id: chatIdOf(k), photo: null as Record<string, unknown> | null, lastAnswer: null as number | null }));

  /** One update through the webhook, its run followed to its end and its answer: the inbound window and the answer's (ms). */
  async function update(chat: (typeof chats)[number], text: string, extra: Record<string, unknown> = {}) {
    const message = { message_id: ++messageId, date: Math.floor(Date.now() / 1000), chat: { id: chat.id, type: "supergroup", title: "bench" }, from: USER, ...extra };
    const answered = api.answerIn(chat.id);
    const t0 = performance.now();
    const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify({ update_id: ++updateId, message }) });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`webhook answered ${res.status}`);
    const arrival = await runner.arrived(text);
    const stream = await fetch(`${host.url}/v1/runs/${arrival.runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    arrival.release();
    const frames = await untilEnd(stream);
    if (!frames.includes('"status":"completed"')) throw new Error(`run ${arrival.runId} did not complete: ${frames.slice(-200)}`);
    const answer = await answered;
    chat.lastAnswer = answer.messageId;
    return { message, inbound: arrival.at - t0, answer: answer.at - runner.lastSent.get(arrival.runId)! };
  }

  return {
    /** Each chat's photo, received (downloaded and stored) before anything is measured: the replies below re-use it. */
    async seed() {
      for (const [k, chat] of chats.entries()) {
        const text = `${TEXT_KEYED}seed ${k}`;
        const { message } = await update(chat, text, { caption: text, photo: [{ file_id: `photo-${k}`, file_unique_id: `u-photo-${k}`, width: 90, height: 90 }] });
        chat.photo = message;
      }
    },
    /** The `n`th update (event `i`): plain, every fourth a reply to its chat's photo, every fourth (offset) a reply to the bot's last answer. */
    event(n: number, i: number) {
      const chat = chats[n % CHATS];
      const text = `${TEXT_KEYED}event ${i}`;
      const replied = n % 4 === 1 ? chat.photo : n % 4 === 3 && chat.lastAnswer !== null ? { message_id: chat.lastAnswer, date: 0, chat: { id: chat.id, type: "supergroup" }, from: BOT_USER, text: "ok" } : null;
      const kind = replied === null ? "plain" : replied === chat.photo ? "reply_to_photo" : "reply_to_bot";
      return update(chat, text, { text, ...(replied ? { reply_to_message: replied } : {}) }).then((e) => ({ ...e, kind }));
    },
    close: () => api.close(),
  };
}
