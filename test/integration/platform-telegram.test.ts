import { createHash } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ANSWER_FILE, fileOf, formOf, gapsBetween, waitFor } from "../support/fake-platform";
import { largeFile } from "../support/host-api";
import { useTelegramPlatform, type TelegramPlatform } from "../support/telegram-platform";

/** Telegram updates in and replies out: secrets, quoting, topics, upgrades, streaming, limits, refusals, the webhook, files in answers. */
const platform = useTelegramPlatform();
const { BOT_TOKEN, SECRET_TOKEN, PHOTO, throttledChats, LEAKY_CHAT, UPGRADED_GROUP, ITS_SUPERGROUP, UPGRADED_MID_REPLY, ITS_NEW_SUPERGROUP, droppingChats, cutEditChats, answered, update, post, sendsTo, editsOf, contextFor, messageIdOf } = platform;
let host: TelegramPlatform["host"];
let fake: TelegramPlatform["fake"];
let runner: TelegramPlatform["runner"];
let botId: string;
let webhookUrl: string;
beforeAll(() => void ({ host, fake, runner, botId, webhookUrl } = platform));

describe("Telegram: webhook in, reply out", () => {
  it("runs a verified message and replies in its chat, quoting it; the context names the real surface", async () => {
    const u = update("-100200", { text: "hello telegram" });
    const res = await post(u);
    expect(res).toEqual({ status: 200, body: { ok: true } });
    const [send] = await waitFor(() => sendsTo("-100200").length > 0 && sendsTo("-100200"), 15_000, "the reply");
    expect(send.body).toMatchObject({ chat_id: "-100200", text: "echo: hello telegram", reply_parameters: { message_id: u.message.message_id } });
    expect(send.body.message_thread_id).toBeUndefined();

    const [ctx] = contextFor("hello telegram");
    expect(ctx.event).toMatchObject({ event_id: `telegram:${botId}:${u.update_id}`, event_type: "message.received", source: "telegram", source_event_type: "message" });
    expect(ctx.trigger.source).toBe("platform");
    expect(ctx.conversation).toMatchObject({ conversation_id: "-100200", thread_id: null, bot_id: botId, sender_id: "42" });
    expect(ctx.actor).toMatchObject({ actor_type: "user", actor_id: "42", actor_name: "Ada" });
    expect(ctx.delivery).toEqual({
      surface: "telegram",
      reply_target: { chat_id: "-100200", message_thread_id: null, reply_to_message_id: u.message.message_id },
      supports_streaming: true,
      supports_edit: true,
      supports_reaction: false,
      max_message_size: 4096,
      platform_capabilities: { threads: "forum_topics", reply_quotes: true, files: { max_bytes: 50_000_000 } },
    });
    // The raw update is in R2, referenced, never inlined.
    const raw = await host.r2Object(ctx.event.raw_ref);
    expect(JSON.parse(new TextDecoder().decode(raw!))).toEqual(u);

    // The delivery trail: attempted then succeeded, with the platform's message id.
    const trail = await waitFor(async () => {
      const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [ctx.run_id]);
      return rows.length >= 2 && rows;
    });
    expect(trail.map((r) => r.event_type)).toEqual(["delivery.attempted", "delivery.succeeded"]);
    expect(JSON.parse(trail[1].data_json)).toMatchObject({ platform: "telegram", bot_id: botId, operation: "send", part: 1, attempt: 1, message_id: String(messageIdOf(send)) });
  });

  it("keeps a forum topic as the thread and replies into it", async () => {
    await post(update("-100300", { text: "in a topic", message_thread_id: 77, is_topic_message: true }));
    const [send] = await waitFor(() => sendsTo("-100300").length > 0 && sendsTo("-100300"));
    expect(send.body).toMatchObject({ message_thread_id: 77, text: "echo: in a topic" });
    expect(contextFor("in a topic")[0].conversation).toMatchObject({ conversation_id: "-100300", thread_id: "77" });
  });

  it("follows a group upgraded to a supergroup: the reply goes to the chat id Telegram names", async () => {
    await post(update(UPGRADED_GROUP, { text: "hello old group" }));
    const [reply] = await waitFor(() => sendsTo(ITS_SUPERGROUP).length > 0 && sendsTo(ITS_SUPERGROUP), 15_000, "the reply in the supergroup");
    expect(reply.body.text).toBe("echo: hello old group");
    expect(sendsTo(UPGRADED_GROUP)).toHaveLength(1);
    // The user's message is the group's: its id names another message in the supergroup, which must not be quoted.
    expect(sendsTo(UPGRADED_GROUP)[0].body.reply_parameters).toMatchObject({ message_id: expect.any(Number) });
    expect(reply.body.reply_parameters).toBeUndefined();
  });

  it("follows a group upgraded mid-reply for the reply's next posts, but edits each message only in the chat it was posted in", async () => {
    // A draft of two messages posted in the group, which is upgraded then; the final text fits in one message.
    await post(update(UPGRADED_MID_REPLY, { text: "shrink 3000" }));
    const [final] = await waitFor(() => sendsTo(ITS_NEW_SUPERGROUP).length > 0 && sendsTo(ITS_NEW_SUPERGROUP), 15_000, "the final text in the supergroup");
    expect(final.body.text).toBe("short final");
    const drafts = sendsTo(UPGRADED_MID_REPLY);
    const runId = contextFor("shrink 3000")[0].run_id;
    await host.waitForRun(runId);
    const superseded = await waitFor(() => fake.callsTo(/\/editMessageText$/).find((c) => c.body.text === "…" && c.body.message_id === messageIdOf(drafts[1])), 10_000, "the second draft message superseded");
    // Its message ids are the group's: editing them in the supergroup would change other messages there.
    expect(superseded.body.chat_id).toBe(UPGRADED_MID_REPLY);
    expect(editsOf(ITS_NEW_SUPERGROUP)).toEqual([]);
    expect(new Set(editsOf(UPGRADED_MID_REPLY).map((c) => c.body.message_id))).toEqual(new Set(drafts.map(messageIdOf)));
    // Once an edit named the supergroup, the final text went straight there: only the two drafts were sent to the group.
    expect(drafts).toHaveLength(2);
    expect(sendsTo(ITS_NEW_SUPERGROUP)).toHaveLength(1);
  });

  it("refuses a wrong or missing secret token with 401 and runs nothing", async () => {
    const before = runner.calls.length;
    const wrong = await post(update("-100400", { text: "forged" }), "not-the-secret");
    const missing = await post(update("-100400", { text: "forged" }), null);
    for (const res of [wrong, missing]) {
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("unauthorized");
    }
    // Nothing was recorded, so nothing can run.
    expect(await host.query("SELECT 1 FROM event_log WHERE conversation_id = '-100400'")).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });

  it("answers an unknown bot with 404", async () => {
    const res = await fetch(webhookUrl.replace(botId, "bot_nope"), { method: "POST", headers: { "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: "{}" });
    expect(res.status).toBe(404);
  });

  it("never runs a redelivered update twice, however late", async () => {
    const u = update("-100500", { text: "only once" });
    await post(u);
    await waitFor(() => sendsTo("-100500").length > 0);
    expect((await post(u)).status).toBe(200);
    expect((await post(u)).status).toBe(200);
    // A barrier instead of a sleep: the chat's runs go one after another, so once a later message is answered, a second run of the first would have been too.
    await post(update("-100500", { text: "marker" }));
    await waitFor(() => sendsTo("-100500").length > 1);
    expect(contextFor("only once")).toHaveLength(1);
    expect(sendsTo("-100500")).toHaveLength(2);
    const rows = await host.query("SELECT event_id FROM event_log WHERE event_id = ?", [`telegram:${botId}:${u.update_id}`]);
    expect(rows).toHaveLength(1);
  });

  it("streams a reply into one message, edited at most once a second, ending exactly on the final text", async () => {
    await post(update("-100600", { text: "stream one two three four five six" }));
    const final = "one two three four five six";
    await waitFor(() => editsOf("-100600").some((c) => c.body.text === final), 15_000, "the final edit");
    const [send] = sendsTo("-100600");
    expect(sendsTo("-100600")).toHaveLength(1);
    expect(final.startsWith(send.body.text)).toBe(true);
    const edits = editsOf("-100600");
    expect(edits.every((e) => e.body.message_id === messageIdOf(send))).toBe(true);
    expect(edits.at(-1)!.body.text).toBe(final);
    // The send and every edit of the message are at least the interval apart (small clock tolerance).
    for (const gap of gapsBetween([send.at, ...edits.map((e) => e.at)])) expect(gap).toBeGreaterThanOrEqual(950);
    // Six deltas over ~1.5 s: far fewer edits than deltas.
    expect(edits.length).toBeLessThanOrEqual(3);
  });

  it("an edit whose answer broke off is tried again, never taken for a refusal that would post the text anew", async () => {
    cutEditChats.add("-100650");
    await post(update("-100650", { text: "stream one two three four five six" }));
    await waitFor(() => editsOf("-100650").some((c) => c.body.text === "one two three four five six"), 15_000, "the final edit");
    const runId = contextFor("stream one two three four five six").find((c) => c.conversation.conversation_id === "-100650")!.run_id;
    await host.waitForRun(runId);
    const rows = await waitFor(async () => {
      const r = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
      return r.filter((row) => row.event_type === "delivery.succeeded").length >= 2 && r;
    });
    expect(rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) })).find((r) => r.type === "delivery.failed")).toMatchObject({ operation: "edit", code: "network_error", will_retry: true });
    expect(sendsTo("-100650")).toHaveLength(1);
  });

  it("splits a long reply at 4096 characters, every part in the chat, only the first quoting", async () => {
    await post(update("-100700", { text: "long 9000" }));
    const sends = await waitFor(() => sendsTo("-100700").length >= 3 && sendsTo("-100700"));
    expect(sends.every((s) => s.body.text.length <= 4096)).toBe(true);
    expect(sends.map((s) => s.body.text).join("")).toHaveLength(9000);
    expect(sends[0].body.reply_parameters).toBeDefined();
    expect(sends.slice(1).every((s) => s.body.reply_parameters === undefined)).toBe(true);
  });

  it("cuts a runaway reply at DELIVERY_MAX_PARTS (20) messages, the last saying so", async () => {
    await post(update("-100710", { text: "long 200000" }));
    const runId = await waitFor(() => contextFor("long 200000").find((c) => c.conversation.conversation_id === "-100710")?.run_id);
    expect((await host.waitForRun(runId)).message?.content).toHaveLength(200_000);
    const sends = await waitFor(() => sendsTo("-100710").length >= 20 && sendsTo("-100710"));
    await new Promise((r) => setTimeout(r, 500));
    expect(sendsTo("-100710")).toHaveLength(20);
    expect(sends.at(-1)!.body.text).toBe("(The answer goes on, but is too long for this chat: the rest was cut.)");
    expect(sends.slice(0, -1).every((s) => s.body.text.length > 2048 && s.body.text.length <= 4096)).toBe(true);
  });

  it("retries a 429 after the retry_after Telegram asks for, and records both attempts", async () => {
    throttledChats.set("-100800", 1);
    await post(update("-100800", { text: "rate limited" }));
    const sends = await waitFor(() => sendsTo("-100800").length >= 2 && sendsTo("-100800"));
    expect(sends[1].at - sends[0].at).toBeGreaterThanOrEqual(950);
    const runId = contextFor("rate limited")[0].run_id;
    const rows = await waitFor(async () => {
      const r = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
      return r.length >= 4 && r;
    });
    expect(rows.map((r) => r.event_type)).toEqual(["delivery.attempted", "delivery.failed", "delivery.attempted", "delivery.succeeded"]);
    expect(JSON.parse(rows[1].data_json)).toMatchObject({ status: 429, code: "rate_limited", retry_after_ms: 1000, will_retry: true, attempt: 1 });
    expect(JSON.parse(rows[3].data_json)).toMatchObject({ attempt: 2 });
    expect((await host.waitForRun(runId)).status).toBe("completed");
  });

  it("never sends again a message whose connection dropped before Telegram answered: it may have been posted", async () => {
    droppingChats.add("-100950");
    await post(update("-100950", { text: "posted once" }));
    const runId = (await waitFor(() => contextFor("posted once")[0]))!.run_id;
    const rows = await waitFor(async () => {
      const r = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
      return r.some((row) => row.event_type === "delivery.failed") && r;
    });
    expect(rows.map((r) => r.event_type)).toEqual(["delivery.attempted", "delivery.failed"]);
    expect(JSON.parse(rows[1].data_json)).toMatchObject({ operation: "send", code: "network_error", will_retry: false });
    expect(sendsTo("-100950").map((c) => c.body.text)).toEqual(["echo: posted once"]);
  });

  it("a reply waiting out a rate limit holds neither its run nor the next run, and the next reply comes after it", async () => {
    throttledChats.set("-101200", 2);
    await post(update("-101200", { text: "first" }));
    const [refused] = await waitFor(() => sendsTo("-101200").length > 0 && sendsTo("-101200"));
    expect(refused.reply?.status).toBe(429);
    // The run's status was final before its reply was even tried.
    const first = contextFor("first")[0].run_id;
    expect((await host.admin("GET", `/v1/runs/${first}`)).body.status).toBe("completed");
    await post(update("-101200", { text: "second" }));
    const second = (await waitFor(() => contextFor("second")[0], 15_000, "the second run"))!.run_id;
    expect((await host.waitForRun(second)).status).toBe("completed");
    const [{ ended_at: secondEndedAt }] = await host.query<{ ended_at: number }>("SELECT ended_at FROM run WHERE run_id = ?", [second]);
    const sends = await waitFor(() => sendsTo("-101200").length >= 3 && sendsTo("-101200"), 15_000, "both replies");
    // The second run ended while the first reply still waited for its retry; its own reply waited its turn behind it.
    expect(secondEndedAt).toBeLessThan(sends[1].at);
    expect(sends.map((c) => c.body.text)).toEqual(["echo: first", "echo: first", "echo: second"]);
    expect(sends[1].at - sends[0].at).toBeGreaterThanOrEqual(1950);
    expect(sends[2].at).toBeGreaterThanOrEqual(sends[1].at);
  });

  it("downloads a photo into R2 as an input artifact the runner gets by reference", async () => {
    await post(update("-100900", { caption: "look", photo: [{ file_id: "small", width: 90, height: 90 }, { file_id: "big", width: 800, height: 800 }] }));
    await waitFor(() => sendsTo("-100900").length > 0);
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toContain("big");
    const [ctx] = contextFor("look");
    expect(ctx.input.attachments).toHaveLength(1);
    const [ref] = ctx.input.attachments;
    expect(ref).toMatchObject({ artifact_type: "image", mime_type: "image/jpeg", size_bytes: PHOTO.length });
    expect(ctx.input.contents).toEqual([{ type: "text", text: "look" }, { type: "image", artifact_id: ref.artifact_id }]);
    expect(await host.r2Object(`artifacts/${ref.artifact_id}`)).toEqual(PHOTO);
  });

  it("sets the webhook with the secret token through the admin API", async () => {
    const res = await host.admin("POST", `/v1/admin/bots/${botId}/webhook`);
    answered.push(JSON.stringify(res.body));
    expect(res).toEqual({ status: 200, body: { bot_id: botId, webhook_url: webhookUrl, registered: true } });
    const [call] = fake.callsTo(/\/setWebhook$/);
    expect(call.body).toEqual({ url: webhookUrl, secret_token: SECRET_TOKEN });
  });

  it("removes the webhook through the admin API (deleteWebhook), as before a DELETE of the bot; a refusal is a 502 without the token", async () => {
    const res = await host.admin("DELETE", `/v1/admin/bots/${botId}/webhook`);
    answered.push(JSON.stringify(res.body));
    expect(res).toEqual({ status: 200, body: { bot_id: botId, registered: false } });
    const [call] = fake.callsTo(/\/deleteWebhook$/);
    expect(call.path).toBe(`/bot${BOT_TOKEN}/deleteWebhook`);
    // The bot stays registered, and its webhook can be set again.
    expect((await host.admin("GET", `/v1/admin/bots/${botId}`)).status).toBe(200);
    expect((await host.admin("POST", `/v1/admin/bots/${botId}/webhook`)).status).toBe(200);
    // A bot whose token Telegram no longer takes: the platform's refusal, as a 502.
    const revoked = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: fake.url, credentials: { bot_token: "999:REVOKED-telegram-bot-token", secret_token: SECRET_TOKEN } });
    const refused = await host.admin("DELETE", `/v1/admin/bots/${revoked.body.bot_id}/webhook`);
    answered.push(JSON.stringify(refused.body));
    expect([refused.status, refused.body.error.code, refused.body.error.message]).toEqual([502, "bad_gateway", "telegram refused to remove the webhook: Unauthorized"]);
    expect((await host.admin("DELETE", "/v1/admin/bots/no-such-bot/webhook")).status).toBe(404);
  });

  it("keeps the bot token and secret token out of every answer, record and log line", async () => {
    // A failure whose platform message echoes the token, and a refused webhook (logged), happen here too.
    await post(update(LEAKY_CHAT, { text: "leak?" }));
    await post(update("-101100", { text: "forged" }), "wrong");
    const runId = await waitFor(() => contextFor("leak?")[0]?.run_id);
    const failed = await waitFor(async () => (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]))[0]);
    expect(JSON.parse(failed.data_json)).toMatchObject({ status: 400, will_retry: false, error: "Bad Request: chat not found (bot [redacted])" });
    // A delivery that fails for good leaves the run as it ended.
    expect((await host.waitForRun(runId)).status).toBe("completed");
    const got = await host.admin("GET", `/v1/admin/bots/${botId}`);
    const list = await host.admin("GET", "/v1/admin/bots");
    answered.push(JSON.stringify(got.body), JSON.stringify(list.body));
    expect(got.body.credential_fields).toEqual(["bot_token", "secret_token"]);

    // The bot's notes of that failure and that refusal quote no secret either.
    expect(got.body.last_delivery_failure).toMatchObject({ run_id: runId, error: "Bad Request: chat not found (bot [redacted])" });
    expect(got.body.last_webhook_refusal).toMatchObject({ reason: "webhook refused: bad or missing X-Telegram-Bot-Api-Secret-Token" });
    const records = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    const raws = await Promise.all((await host.r2Keys("raw/")).map(async (k) => new TextDecoder().decode((await host.r2Object(k))!)));
    expect(host.logs()).toMatch(/webhook refused/);
    for (const secret of [BOT_TOKEN, SECRET_TOKEN]) {
      for (const text of [...answered, ...records.map((r) => r.row), ...raws, host.logs()]) expect(text).not.toContain(secret);
    }
  });
});

describe("Telegram: files in answers", () => {
  /** The uploads to a chat, with their form fields parsed. */
  const uploadsTo = async (chat: string) => {
    const uploads = [];
    for (const call of fake.callsTo(/\/send(Photo|Document)$/)) {
      const form = await formOf(call);
      if (form.get("chat_id") === chat) uploads.push({ method: call.path.split("/").pop(), form });
    }
    return uploads;
  };
  const deliveryRecords = (runId: string) =>
    host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);

  it("sends an artifact the run created after its text: an image as a photo in the same topic, quoting nothing twice", async () => {
    const u = update("-102100", { text: "attach chart.png", message_thread_id: 5, is_topic_message: true });
    await post(u);
    const [upload] = await waitFor(async () => (await uploadsTo("-102100")).length > 0 && uploadsTo("-102100"), 15_000, "the photo");
    expect(upload.method).toBe("sendPhoto");
    expect(upload.form.get("message_thread_id")).toBe("5");
    // The text went first and quoted the user's message; the photo follows it without quoting again.
    expect(sendsTo("-102100")[0].body).toMatchObject({ text: "here is chart.png", reply_parameters: { message_id: u.message.message_id } });
    expect(upload.form.get("reply_parameters")).toBeNull();
    const photo = await fileOf(upload.form, "photo");
    expect(photo).toMatchObject({ name: "chart.png", type: "image/png" });
    expect(photo.bytes.equals(ANSWER_FILE)).toBe(true);

    const runId = contextFor("attach chart.png")[0].run_id;
    const records = await waitFor(async () => {
      const rows = await deliveryRecords(runId);
      return rows.length >= 4 && rows;
    });
    const sent = JSON.parse(records[3].data_json);
    expect(records[3].event_type).toBe("delivery.succeeded");
    expect(sent).toMatchObject({ operation: "send_file", bytes: ANSWER_FILE.length, message_id: expect.any(String) });
    expect(sent.artifact_id).toMatch(/^art_/);
    // The ledger names the stored artifact, not its bytes.
    const [created] = await host.query<{ data_json: string }>("SELECT data_json FROM run_event WHERE run_id = ? AND type = 'artifact.created'", [runId]);
    expect(JSON.parse(created.data_json)).toEqual({ artifact_type: "image", mime_type: "image/png", name: "chart.png", artifact_id: sent.artifact_id, size_bytes: ANSWER_FILE.length, sha256: createHash("sha256").update(ANSWER_FILE).digest("hex") });
    expect(contextFor("attach chart.png")[0].delivery.platform_capabilities.files).toEqual({ max_bytes: 50_000_000 });
  });

  it("streams a file over 10 MB whole, with its length declared: an image too large for a photo goes as a document", async () => {
    // Uploaded chunked, without a length: stored as a multipart upload of three parts (5 + 5 + 2 MiB).
    const size = 12 * 1024 * 1024;
    await post(update("-102150", { text: `upload big.png ${size} chunked` }));
    const [upload] = await waitFor(async () => (await uploadsTo("-102150")).length > 0 && uploadsTo("-102150"), 30_000, "the document");
    expect(upload.method).toBe("sendDocument");
    const document = await fileOf(upload.form, "document");
    expect(document).toMatchObject({ name: "big.png", type: "image/png" });
    expect(document.bytes.equals(largeFile(size))).toBe(true);
    const [call] = fake.callsTo(/\/sendDocument$/).filter((c) => c.raw.includes('name="chat_id"\r\n\r\n-102150'));
    expect(call.headers["transfer-encoding"]).toBeUndefined();
    expect(Number(call.headers["content-length"])).toBe(call.bytes.length);
    const runId = contextFor(`upload big.png ${size} chunked`)[0].run_id;
    const records = await waitFor(async () => {
      const rows = (await deliveryRecords(runId)).filter((r) => r.event_type === "delivery.succeeded").map((r) => JSON.parse(r.data_json));
      return rows.some((r) => r.operation === "send_file") && rows;
    });
    expect(records.find((r) => r.operation === "send_file")).toMatchObject({ bytes: size });
  });

  it("sends anything but an image as a document, quoting the user when no text went first", async () => {
    const u = update("-102200", { text: "attachonly report.pdf" });
    await post(u);
    const [upload] = await waitFor(async () => (await uploadsTo("-102200")).length > 0 && uploadsTo("-102200"), 15_000, "the document");
    expect(upload.method).toBe("sendDocument");
    expect(JSON.parse(String(upload.form.get("reply_parameters")))).toMatchObject({ message_id: u.message.message_id });
    const doc = await fileOf(upload.form, "document");
    expect(doc).toMatchObject({ name: "report.pdf", type: "application/pdf" });
    expect(doc.bytes.equals(ANSWER_FILE)).toBe(true);
    // An answer of files (and an image by URL) that were sent needs no "no text" notice.
    await host.waitForRun(contextFor("attachonly report.pdf")[0].run_id);
    await new Promise((r) => setTimeout(r, 300));
    expect(sendsTo("-102200")).toEqual([]);
  });

  it("sends back an image the answer names by artifact id: the user's own photo", async () => {
    await post(update("-102300", { caption: "show input", photo: [{ file_id: "big", width: 800, height: 800 }] }));
    const [upload] = await waitFor(async () => (await uploadsTo("-102300")).length > 0 && uploadsTo("-102300"), 15_000, "the photo");
    expect((await fileOf(upload.form, "photo")).bytes.equals(Buffer.from(PHOTO))).toBe(true);
    expect(sendsTo("-102300")[0].body.text).toBe("showing input");
  });

  it("never sends another conversation's artifact, whatever the runner names; the text still goes and the refusal is recorded", async () => {
    await post(update("-102400", { caption: "mine", photo: [{ file_id: "big", width: 800, height: 800 }] }));
    await waitFor(() => sendsTo("-102400").length > 0);
    const theirs = contextFor("mine")[0].input.attachments[0].artifact_id;
    await post(update("-102500", { text: `show ${theirs}` }));
    await waitFor(() => sendsTo("-102500").length > 0, 15_000, "the text");
    const runId = contextFor(`show ${theirs}`)[0].run_id;
    const failed = await waitFor(async () => (await deliveryRecords(runId)).find((r) => r.event_type === "delivery.failed"));
    expect(JSON.parse(failed.data_json)).toMatchObject({ operation: "send_file", artifact_id: theirs, code: "artifact_unavailable", will_retry: false });
    expect(await uploadsTo("-102500")).toEqual([]);
  });

  it("tells the user when an answer of files could send none of them", async () => {
    await post(update("-102600", { text: "attachonly report.pdf" }));
    const [notice] = await waitFor(() => sendsTo("-102600").length > 0 && sendsTo("-102600"), 15_000, "the notice");
    expect(notice.body.text).toBe("(The answer's files could not be sent here.)");
    expect(fake.callsTo(/\/sendDocument$/).filter((c) => c.raw.includes('name="chat_id"\r\n\r\n-102600'))).toHaveLength(1);
  });
});
