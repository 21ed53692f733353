import { createHash, randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { settledRefusals } from "../support/settled-refusals";
import { ANSWER_FILE, fileOf, formOf, waitFor, type PlatformCall } from "../support/fake-platform";
import { useLarkPlatform, type LarkPlatform } from "../support/lark-platform";

/** Lark answers refused or cut on the way out, secrets kept, files in answers and card presses. */
const platform = useLarkPlatform();
const { cutNextImageUpload, nextSeq, APP_ID, APP_SECRET, VERIFICATION_TOKEN, ENCRYPT_KEY, TENANT_TOKEN, DLP_WORD, throttledMessages, cutFilePosts, refusedReplies, plain, encrypted, answered, pause, encrypt, postRaw, postPlain, postEncrypted, event, received, repliesTo, statusOf, contextFor } = platform;
let host: LarkPlatform["host"];
let fake: LarkPlatform["fake"];
let runner: LarkPlatform["runner"];
beforeAll(() => void ({ host, fake, runner } = platform));

describe("Lark/Feishu: event subscription in, Open API out", () => {
  it("tells the chat once when the tenant's content check refuses an answer (230028), streamed or sent whole; the refusal stays recorded", async () => {
    // Streamed (the plain bot): the first words show in a card, the patch and the final text are refused.
    const streamed = received("oc_dlp_stream", { text: `stream the ${DLP_WORD} figures` });
    // Sent whole (the encrypted bot's agent does not stream): the one message is refused.
    const whole = received("oc_dlp_whole", { text: `the ${DLP_WORD} figures` });
    expect((await postPlain(streamed)).status).toBe(200);
    expect((await postEncrypted(whole)).status).toBe(200);
    const cases = [
      { ev: streamed, text: `stream the ${DLP_WORD} figures`, notice: "(Part of this answer was withheld: this organization's content policy blocked it.)" },
      { ev: whole, text: `the ${DLP_WORD} figures`, notice: "(This answer was withheld: this organization's content policy blocked it.)" },
    ];
    for (const { ev, text, notice } of cases) {
      const runId = (await waitFor(() => contextFor(text)[0], 15_000, "the run")).run_id;
      const given = await waitFor(async () => {
        const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
        return rows.map((r) => JSON.parse(r.data_json)).find((r) => r.operation === "send" && r.will_retry === false);
      }, 15_000, "the refused send");
      expect(given).toMatchObject({ code: "lark_230028", status: 400 });
      expect(given.error).toMatch(/^The messages do NOT pass the audit, ext=dlp \(the chat was told it was withheld: message om_reply_\d+\)$/);
      // Posted once, as text, where the answer would have gone: nothing it says reached the chat.
      const shown = repliesTo(ev.event.message.message_id).filter((c) => statusOf(c) === 200);
      const notices = shown.filter((c) => c.body.msg_type === "text" && JSON.parse(c.body.content).text === notice);
      expect(notices).toHaveLength(1);
      for (const call of fake.calls.filter((c) => statusOf(c) === 200)) expect(String(call.body?.content ?? "")).not.toContain(DLP_WORD);
    }
  });

  it("still tells the chat when Lark rate-limits the content check's notice at first: the refused send is tried again, and the notice with it", async () => {
    const ev = received("oc_dlp_throttled", { text: `the ${DLP_WORD} totals` });
    const asked = ev.event.message.message_id;
    // The answer is refused for what it says; the notice after it, posted at once, meets the chat's limit (230020) once.
    throttledMessages.set(asked, { status: 400, code: 230020 });
    expect((await postEncrypted(ev)).status).toBe(200);
    const notice = "(This answer was withheld: this organization's content policy blocked it.)";
    const noticeOf = (c: PlatformCall) => statusOf(c) === 200 && c.body.msg_type === "text" && JSON.parse(c.body.content).text === notice;
    await waitFor(() => repliesTo(asked).some(noticeOf), 15_000, "the notice");
    const runId = contextFor(`the ${DLP_WORD} totals`)[0].run_id;
    const refused = await waitFor(async () => {
      const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
      return rows.map((r) => JSON.parse(r.data_json)).find((r) => r.operation === "send" && r.will_retry === false);
    }, 15_000, "the refused send");
    expect(refused).toMatchObject({ code: "lark_230028" });
    expect(refused.error).toMatch(/\(the chat was told it was withheld: message om_reply_\d+\)$/);
    await pause(500);
    expect(repliesTo(asked).filter(noticeOf)).toHaveLength(1);
  });

  it("answers a message deleted (not recalled) once its runner had it in the chat, as a recalled one", async () => {
    const ev = received("oc_deleted", { text: "deleted meanwhile" });
    refusedReplies.set(ev.event.message.message_id, { code: 230110, msg: "Action unavailable as the message has been deleted." });
    await postPlain(ev);
    const posted = await waitFor(() => fake.calls.find((c) => c.path === "/open-apis/im/v1/messages" && c.body?.receive_id === "oc_deleted"), 15_000, "the answer in the chat");
    expect(posted.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: deleted meanwhile" }) });
    expect(repliesTo(ev.event.message.message_id).map(statusOf)).toEqual([400]);
  });

  it("stops a reply at the first refusal of a chat that removed the bot: its other parts are not tried, and it is recorded once", async () => {
    // Three parts.
    const ev = received("oc_removed", { text: "long 20001" });
    refusedReplies.set(ev.event.message.message_id, { code: 230002, msg: "The bot can not be outside the group." });
    await postPlain(ev);
    const runId = (await waitFor(() => contextFor("long 20001")[0], 15_000, "the run")).run_id;
    // Settled: nothing more is tried after the one refusal.
    const [failures] = await settledRefusals(host, [runId]);
    expect(repliesTo(ev.event.message.message_id).map(statusOf)).toEqual([400]);
    expect(fake.calls.filter((c) => c.body?.receive_id === "oc_removed")).toEqual([]);
    expect(failures).toEqual([expect.objectContaining({ operation: "send", part: 1, code: "lark_230002", will_retry: false })]);
  });

  it("never lends a bot of the same app the tenant token another bot's secret fetched: a wrong app secret fails its replies", async () => {
    // Another bot of the app has fetched (and cached) a token with the right secret.
    const warm = received("oc_right_secret", { text: "warm the token" });
    await postPlain(warm);
    await waitFor(() => repliesTo(warm.event.message.message_id).length > 0, 15_000, "the right secret's reply");
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: "a-mistyped-app-secret-0000", verification_token: VERIFICATION_TOKEN } });
    expect(created.status).toBe(201);
    answered.push(JSON.stringify(created.body));
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-wrong-secret", scope: { type: "bot", id: created.body.bot_id } });
    const ev = received("oc_wrong_secret", { text: "who am i" });
    expect((await postRaw(created.body.webhook_url, JSON.stringify(ev))).status).toBe(200);
    const runId = (await waitFor(() => contextFor("who am i")[0], 15_000, "the run")).run_id;
    // The reply's outcome, whichever it is: sent, or given up.
    const outcome = await waitFor(
      async () => {
        const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId]);
        return rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) })).find((r) => r.type === "delivery.succeeded" || r.will_retry === false);
      },
      15_000,
      "the reply's outcome",
    );
    expect(repliesTo(ev.event.message.message_id)).toEqual([]);
    expect(outcome).toMatchObject({ type: "delivery.failed", operation: "send", code: "lark_10014" });
  });

  it("keeps the app secret, verification token, encrypt key and tenant token out of every answer, record and log line", async () => {
    await postEncrypted(received("oc_900", { text: "forged" }), { key: "wrong-encrypt-key-000" });
    const list = await host.admin("GET", "/v1/admin/bots");
    answered.push(JSON.stringify(list.body));
    expect(list.body.items.map((b: any) => b.credential_fields)).toContainEqual(["app_id", "app_secret", "encrypt_key", "verification_token"]);
    const records = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    const raws = await Promise.all((await host.r2Keys("raw/")).map(async (k) => new TextDecoder().decode((await host.r2Object(k))!)));
    expect(host.logs()).toMatch(/webhook refused/);
    for (const secret of [APP_SECRET, VERIFICATION_TOKEN, ENCRYPT_KEY, TENANT_TOKEN]) {
      for (const text of [...answered, ...records.map((r) => r.row), ...raws, host.logs()]) expect(text).not.toContain(secret);
    }
  });
});

describe("Lark/Feishu: files in answers", () => {
  it("uploads an image, then replies with its image_key; any other file (an SVG too) goes up as a file and out by its file_key", async () => {
    for (const [name, kind] of [["chart.png", "image"], ["report.pdf", "file"], ["diagram.svg", "file"]] as const) {
      const ev = received("oc_files", { text: `attach ${name}` });
      await postPlain(ev);
      const messageId = ev.event.message.message_id;
      const replies = await waitFor(() => repliesTo(messageId).length >= 2 && repliesTo(messageId), 15_000, `the ${kind} reply`);
      expect(JSON.parse(replies[0].body.content)).toEqual({ text: `here is ${name}` });
      const upload = fake.calls.filter((c) => c.path === `/open-apis/im/v1/${kind === "image" ? "images" : "files"}`).at(-1)!;
      expect(upload.headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
      const form = await formOf(upload);
      const sent = await fileOf(form, kind);
      expect(sent.bytes.equals(ANSWER_FILE)).toBe(true);
      expect(sent.name).toBe(name);
      if (kind === "image") expect(form.get("image_type")).toBe("message");
      else expect([form.get("file_type"), form.get("file_name")]).toEqual(["stream", name]);
      const key = upload.reply!.json as { data: Record<string, string> };
      expect(replies[1].body).toMatchObject({ msg_type: kind, reply_in_thread: false });
      expect(JSON.parse(replies[1].body.content)).toEqual(kind === "image" ? { image_key: key.data.image_key } : { file_key: key.data.file_key });
    }
  });
  it("sends an image Lark refuses as an image as a file instead, so it still reaches the chat", async () => {
    const ev = received("oc_files", { text: "attach tall.png" });
    await postPlain(ev);
    const messageId = ev.event.message.message_id;
    const replies = await waitFor(() => repliesTo(messageId).length >= 2 && repliesTo(messageId), 15_000, "the file reply");
    const uploads = fake.calls.filter((c) => /^\/open-apis\/im\/v1\/(images|files)$/.test(c.path) && c.raw.includes('filename="tall.png"'));
    expect(uploads.map((c) => [c.path, statusOf(c)])).toEqual([
      ["/open-apis/im/v1/images", 400],
      ["/open-apis/im/v1/files", 200],
    ]);
    const form = await formOf(uploads[1]);
    expect([form.get("file_type"), form.get("file_name")]).toEqual(["stream", "tall.png"]);
    expect((await fileOf(form, "file")).bytes.equals(ANSWER_FILE)).toBe(true);
    expect(replies[1].body).toMatchObject({ msg_type: "file" });
    expect(JSON.parse(replies[1].body.content)).toEqual({ file_key: (uploads[1].reply!.json as { data: Record<string, string> }).data.file_key });
    const runId = contextFor("attach tall.png")[0].run_id;
    // The success is recorded after Lark answered the post: waited for, not read at once.
    const sendFile = async () =>
      (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]))
        .filter((r) => JSON.parse(r.data_json).operation === "send_file")
        .map((r) => r.event_type);
    await waitFor(async () => (await sendFile()).length >= 2, 5_000, "the file's delivery records");
    expect(await sendFile()).toEqual(["delivery.attempted", "delivery.succeeded"]);
  });
  it("repeats an upload that got no answer, and a file post too: the retry reuses the uploaded key, so its uuid lets Lark drop the repeat", async () => {
    const fileRecords = async (runId: string) =>
      (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]))
        .map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }))
        .filter((r) => r.operation === "send_file" && r.type !== "delivery.attempted");
    cutNextImageUpload();
    const image = received("oc_cut", { text: "attach cut.png" });
    const file = received("oc_cut", { text: "attach cut.pdf" });
    cutFilePosts.add(file.event.message.message_id);
    const filesUploaded = fake.calls.filter((c) => c.path === "/open-apis/im/v1/files").length;
    for (const ev of [image, file]) {
      await postPlain(ev);
      const runId = (await waitFor(() => contextFor(ev.event.message.content.includes("png") ? "attach cut.png" : "attach cut.pdf")[0], 10_000, "the run")).run_id;
      const outcomes = await waitFor(async () => {
        const records = await fileRecords(runId);
        return records.some((r) => r.type === "delivery.succeeded" || r.will_retry === false) && records;
      }, 15_000, "the file's delivery");
      expect(outcomes.map((r) => [r.type, r.code ?? null, r.will_retry ?? null])).toEqual([
        ["delivery.failed", "network_error", true],
        ["delivery.succeeded", null, null],
      ]);
    }
    // The image: uploaded again, then posted once.
    expect(repliesTo(image.event.message.message_id).map((r) => r.body.msg_type)).toEqual(["text", "image"]);
    // The file: uploaded once, its post repeated with the same uuid, which Lark answered with the message it had posted.
    expect(fake.calls.filter((c) => c.path === "/open-apis/im/v1/files").length - filesUploaded).toBe(1);
    const posts = repliesTo(file.event.message.message_id).filter((r) => r.body.msg_type === "file");
    expect(posts).toHaveLength(2);
    expect(posts[1].body).toEqual(posts[0].body);
  });
});

describe("Lark/Feishu: card presses (card.action.trigger)", () => {
  /** The callback's card-update token: it changes the card for 30 minutes, so it is a credential. */
  const CARD_TOKEN = "c-card-update-token-0123456789secret";
  let cards = 0;
  /** A card callback (schema 2.0) as Lark sends it for a press in `chatId`: its create_time in microseconds. */
  function cardPress(chatId: string | null, action: Record<string, unknown>) {
    const messageId = `om_card_${++cards}`;
    const payload = event("card.action.trigger", {
      operator: { tenant_key: "tenant_1", user_id: "u_1", open_id: "ou_user_1", union_id: "on_1" },
      token: CARD_TOKEN,
      action,
      host: "im_message",
      context: chatId ? { open_message_id: messageId, open_chat_id: chatId } : {},
    });
    payload.header.create_time = String(Date.now() * 1000);
    return { payload, messageId };
  }
  /** A press on a legacy message card, as Lark posts it to a "Message Card Request URL": no header, the card's own token. */
  function legacyPress(chatId: string, action: Record<string, unknown>) {
    const messageId = `om_card_${++cards}`;
    return { payload: { open_id: "ou_user_1", user_id: "u_1", open_message_id: messageId, open_chat_id: chatId, tenant_key: "tenant_1", token: CARD_TOKEN, action }, messageId };
  }
  /** Lark signs a legacy card callback with the verification token: hex SHA-1(timestamp + nonce + token + raw body). */
  function postLegacy(url: string, body: string, opts: { ageSeconds?: number; token?: string } = {}) {
    const timestamp = String(Math.floor(Date.now() / 1000) - (opts.ageSeconds ?? 0));
    const nonce = randomBytes(8).toString("hex");
    const signed = createHash("sha1").update(timestamp + nonce + (opts.token ?? VERIFICATION_TOKEN) + body).digest("hex");
    return postRaw(url, body, { "x-lark-request-timestamp": timestamp, "x-lark-request-nonce": nonce, "x-lark-signature": signed });
  }

  it("runs a button press as a message: the runner gets its value and who pressed it, the answer replies to the card; Lark gets {} at once", async () => {
    const { payload, messageId } = cardPress("oc_card", { value: { choice: "yes" }, tag: "button", name: "Button_yes" });
    const started = Date.now();
    const res = await postEncrypted(payload);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({});
    const [reply] = await waitFor(() => repliesTo(messageId).length > 0 && repliesTo(messageId), 15_000, "the answer to the press");
    expect(reply.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: 'echo: {"choice":"yes"}' }), reply_in_thread: false });
    const [ctx] = contextFor('{"choice":"yes"}');
    expect(ctx.event).toMatchObject({ event_type: "message.received", source: "lark", source_event_type: "card.action.trigger", event_id: `lark:${encrypted.botId}:${payload.header.event_id}` });
    expect(ctx.event.data).toEqual({
      lark_event_id: payload.header.event_id,
      tenant_key: "tenant_1",
      component: { custom_id: "Button_yes", component_type: "button", values: [], value: { choice: "yes" } },
      open_message_id: messageId,
      host: "im_message",
    });
    // Microseconds read as such: the press happened now, not in the year 55,000.
    expect(Math.abs(Date.parse(ctx.event.event_time) - Date.now())).toBeLessThan(60_000);
    expect(ctx.conversation).toMatchObject({ conversation_id: "oc_card", thread_id: null, sender_id: "ou_user_1" });
    expect(ctx.delivery).toMatchObject({ surface: "lark", reply_target: { chat_id: "oc_card", reply_to_message_id: messageId, reply_in_thread: false } });
    // The card's update token is kept nowhere.
    const raw = new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!);
    expect(JSON.parse(raw).event.action).toEqual(payload.event.action);
    const stored = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    for (const text of [raw, ...stored.map((r) => r.row), ...answered]) expect(text).not.toContain(CARD_TOKEN);
  });

  it("answers a card button pressed twice in quick succession once: the second press gets a toast saying the first is being answered", async () => {
    const { payload, messageId } = cardPress("oc_card_twice", { value: { choice: "twice" }, tag: "button", name: "Button_twice" });
    const again = { ...payload, header: { ...payload.header, event_id: `ev_${nextSeq()}_test` } };
    const acks = (await Promise.all([postPlain(payload), postPlain(again)])).map((a) => JSON.parse(a.text));
    expect(acks).toContainEqual({});
    expect(acks).toContainEqual({ toast: { type: "info", content: "Already answering your earlier press of this button." } });
    await waitFor(() => repliesTo(messageId).length > 0, 15_000, "the press's answer");
    await new Promise((r) => setTimeout(r, 300));
    expect(repliesTo(messageId)).toHaveLength(1);
    expect(contextFor('{"choice":"twice"}')).toHaveLength(1);
  });

  it("reads a select's option, an input's words and a form's fields as the input", async () => {
    const select = cardPress("oc_card_select", { tag: "select_static", option: "plan_b", value: { step: "pick" } });
    const input = cardPress("oc_card_input", { tag: "input", input_value: "call me later" });
    const form = cardPress("oc_card_form", { tag: "button", name: "Submit", value: { form: "signup" }, form_value: { who: "Ada", tags: ["x", "y"], agree: true } });
    for (const press of [select, input, form]) expect((await postPlain(press.payload)).status).toBe(200);
    for (const press of [select, input, form]) await waitFor(() => repliesTo(press.messageId).length > 0, 15_000, "each press's answer");
    expect(contextFor("plan_b")[0].event.data.component).toEqual({ custom_id: null, component_type: "select_static", values: ["plan_b"], value: { step: "pick" } });
    expect(contextFor("call me later")[0].conversation).toMatchObject({ conversation_id: "oc_card_input" });
    const [submitted] = contextFor("Ada\nx y");
    expect(submitted.event.data.component.form_value).toEqual({ who: "Ada", tags: ["x", "y"], agree: true });
  });

  it("runs a press on a legacy message card (Message Card Request URL, signed with the verification token), plain or encrypted, as a v2 press runs", async () => {
    // The card URL's challenge, should Lark sign it so, is answered too (encrypted, it is signed no other way).
    const challenge = await postLegacy(encrypted.url, encrypt({ challenge: "ch-card", token: VERIFICATION_TOKEN, type: "url_verification" }));
    expect(JSON.parse(challenge.text)).toEqual({ challenge: "ch-card" });
    const button = legacyPress("oc_legacy", { value: { choice: "legacy" }, tag: "button" });
    const select = legacyPress("oc_legacy_enc", { tag: "select_static", option: "plan_c", value: { step: "pick" } });
    const plainRes = await postLegacy(plain.url, JSON.stringify(button.payload));
    const encRes = await postLegacy(encrypted.url, encrypt(select.payload));
    for (const res of [plainRes, encRes]) expect([res.status, JSON.parse(res.text)]).toEqual([200, {}]);
    await waitFor(() => repliesTo(button.messageId).length > 0, 15_000, "the answer to the plain press");
    const [reply] = await waitFor(() => repliesTo(select.messageId).length > 0 && repliesTo(select.messageId), 15_000, "the answer to the encrypted press");
    expect(reply.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: plan_c" }), reply_in_thread: false });
    const [ctx] = contextFor('{"choice":"legacy"}');
    expect(ctx.event).toMatchObject({ event_type: "message.received", source: "lark", source_event_type: "card.action.trigger_v1" });
    expect(ctx.event.data).toEqual({ lark_event_id: null, tenant_key: "tenant_1", component: { custom_id: null, component_type: "button", values: [], value: { choice: "legacy" } }, open_message_id: button.messageId, host: null });
    // Timed by its signed timestamp (the body has no time).
    expect(Math.abs(Date.parse(ctx.event.event_time) - Date.now())).toBeLessThan(60_000);
    expect(ctx.conversation).toMatchObject({ conversation_id: "oc_legacy", thread_id: null, sender_id: "ou_user_1" });
    expect(ctx.delivery).toMatchObject({ reply_target: { chat_id: "oc_legacy", reply_to_message_id: button.messageId, reply_in_thread: false } });
    expect(contextFor("plan_c")[0].conversation).toMatchObject({ conversation_id: "oc_legacy_enc", bot_id: encrypted.botId });
    // The card's update token is kept nowhere.
    const raw = new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!);
    expect(JSON.parse(raw).action).toEqual(button.payload.action);
    const stored = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    for (const text of [raw, ...stored.map((r) => r.row)]) expect(text).not.toContain(CARD_TOKEN);
  });

  it("refuses a legacy card press signed with another token, signed long ago or not signed; one sent again (encrypted anew) runs once", async () => {
    const forged = legacyPress("oc_legacy_forged", { tag: "button", value: "go" });
    const body = JSON.stringify(forged.payload);
    const otherToken = await postLegacy(plain.url, body, { token: "another-verification-token" });
    const stale = await postLegacy(plain.url, body, { ageSeconds: 10 * 60 });
    expect(stale.text).toMatch(/X-Lark-Request-Timestamp is more than 5 minutes away from now/);
    const unsigned = await postRaw(plain.url, body);
    for (const res of [otherToken, stale, unsigned]) expect(res.status).toBe(401);
    expect(await host.query("SELECT 1 FROM event_log WHERE conversation_id = 'oc_legacy_forged'")).toEqual([]);

    const twice = legacyPress("oc_legacy_twice", { tag: "button", value: "once only" });
    for (let i = 0; i < 2; i++) expect((await postLegacy(encrypted.url, encrypt(twice.payload))).status).toBe(200);
    await waitFor(() => repliesTo(twice.messageId).length > 0, 15_000, "the answer");
    await pause(1_000);
    expect(contextFor("once only")).toHaveLength(1);
    expect(repliesTo(twice.messageId)).toHaveLength(1);
  });

  it("tells the presser by a toast when the press starts no answer: no agent takes it, or the card is in no chat", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN } });
    expect(created.status).toBe(201);
    const { payload } = cardPress("oc_card_unbound", { tag: "button", value: "go" });
    const unbound = await postRaw(created.body.webhook_url, JSON.stringify(payload));
    expect(JSON.parse(unbound.text)).toEqual({ toast: { type: "info", content: "No agent answers here." } });
    expect((await host.admin("GET", `/v1/events/lark:${created.body.bot_id}:${payload.header.event_id}`)).body).toMatchObject({ event_type: "message.received", disposition: "unbound" });
    const legacy = await postLegacy(created.body.webhook_url, JSON.stringify(legacyPress("oc_card_unbound", { tag: "button", value: "go" }).payload));
    expect(JSON.parse(legacy.text)).toEqual({ toast: { type: "info", content: "No agent answers here." } });

    const nowhere = cardPress(null, { tag: "button", value: "go" });
    const res = await postPlain(nowhere.payload);
    expect(JSON.parse(res.text)).toEqual({ toast: { type: "info", content: "This interaction is not supported." } });
    expect((await host.admin("GET", `/v1/events/lark:${plain.botId}:${nowhere.payload.header.event_id}`)).body).toMatchObject({ event_type: "platform.unhandled", source_event_type: "card.action.trigger" });
  });
});
