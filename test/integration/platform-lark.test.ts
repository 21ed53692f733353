import { beforeAll, describe, expect, it } from "vitest";
import { gapsBetween, waitFor } from "../support/fake-platform";
import { TABLE_ANSWER, TABLE_ANSWER_LARK } from "../support/markdown-sample";
import { useLarkPlatform, type LarkPlatform } from "../support/lark-platform";

/** Lark events in and answers out: challenges, mentions, encryption, streaming and Markdown cards. */
const platform = useLarkPlatform();
const { VERIFICATION_TOKEN, TENANT_TOKEN, OUR_OPEN_ID, PDF, throttledMessages, refusingMarkdown, readableMessages, plain, encrypted, encrypt, signature, postRaw, postPlain, postEncrypted, received, repliesTo, patchesOf, statusOf, contextFor, cardText } = platform;
let host: LarkPlatform["host"];
let fake: LarkPlatform["fake"];
let runner: LarkPlatform["runner"];
beforeAll(() => void ({ host, fake, runner } = platform));

describe("Lark/Feishu: event subscription in, Open API out", () => {
  it("answers the URL challenge at once, plain or encrypted, and refuses a wrong token", async () => {
    const started = Date.now();
    const res = await postPlain({ challenge: "ch-plain", token: VERIFICATION_TOKEN, type: "url_verification" });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ challenge: "ch-plain" });
    const enc = await postEncrypted({ challenge: "ch-enc", token: VERIFICATION_TOKEN, type: "url_verification" }, { signed: false });
    expect(JSON.parse(enc.text)).toEqual({ challenge: "ch-enc" });
    expect((await postPlain({ challenge: "ch", token: "wrong-token", type: "url_verification" })).status).toBe(401);
  });

  it("runs a plain message and replies to it with the tenant token", async () => {
    const ev = received("oc_100", { text: "hello lark" });
    const res = await postPlain(ev);
    expect(res.status).toBe(200);
    const messageId = ev.event.message.message_id;
    const [reply] = await waitFor(() => repliesTo(messageId).length > 0 && repliesTo(messageId));
    expect(reply.headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
    expect(reply.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: hello lark" }), reply_in_thread: false });
    const [ctx] = contextFor("hello lark");
    expect(ctx.event).toMatchObject({ event_id: `lark:${plain.botId}:${ev.header.event_id}`, source: "lark", source_event_type: "im.message.receive_v1" });
    expect(ctx.conversation).toMatchObject({ conversation_id: "oc_100", thread_id: null, sender_id: "ou_user_1" });
    expect(ctx.delivery).toMatchObject({ surface: "lark", reply_target: { chat_id: "oc_100", reply_to_message_id: messageId, reply_in_thread: false }, supports_edit: true, max_message_size: 9000 });
    const raw = JSON.parse(new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!));
    expect(raw.header.token).toBeUndefined();
  });

  it("shows the runner mentioned users by name where a text message has placeholders, keeping the mentions in the event", async () => {
    const mentions = [
      { key: "@_user_1", id: { open_id: "ou_bot" }, name: "Helper Bot", tenant_key: "tenant_1" },
      { key: "@_user_10", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
    ];
    const ev = received("oc_mentions", { text: "@_user_1 ask @_user_10 and @_user_2 about it" }, { mentions });
    expect((await postPlain(ev)).status).toBe(200);
    const [ctx] = await waitFor(() => contextFor("@Helper Bot ask @Ada and @_user_2 about it").length > 0 && contextFor("@Helper Bot ask @Ada and @_user_2 about it"));
    expect(ctx.event.data.mentions).toEqual(mentions);
  });

  it("names an @all mention the way Lark's mentions list names it, like any other mention placeholder", async () => {
    const mentions = [
      { key: "@_all", id: { open_id: "all", user_id: "all" }, name: "所有人", tenant_key: "tenant_1" },
      { key: "@_user_1", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
    ];
    const ev = received("oc_mention_all", { text: "@_all standup moved, ask @_user_1" }, { mentions });
    expect((await postPlain(ev)).status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_mention_all"), 15_000, "the run");
    expect(ctx.input.text).toBe("@所有人 standup moved, ask @Ada");
  });

  it("names a rich-text message's mentions too: from the mentions list where the element gives no name", async () => {
    // A received post's `at` element can come with an empty user_name (as in Lark's own example): the name is in `mentions`.
    const mentions = [
      { key: "@_user_1", id: { open_id: "ou_bot" }, name: "Helper Bot", tenant_key: "tenant_1" },
      { key: "@_user_2", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
    ];
    const post = { title: "", content: [[{ tag: "at", user_id: "@_user_1", user_name: "", style: [] }, { tag: "text", text: " ask " }, { tag: "at", user_id: "@_user_2", user_name: "Ada" }, { tag: "text", text: " and " }, { tag: "at", user_id: "@_user_3", user_name: "" }]] };
    const ev = received("oc_post_mentions", post, { mentions }, "post");
    expect((await postPlain(ev)).status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_post_mentions"), 15_000, "the run");
    // One nobody named keeps its placeholder, as in a text message.
    expect(ctx.input.text).toBe("@Helper Bot ask @Ada and @_user_3");
  });

  it("leaves its own leading mention out of the text, in a text message and a post; a bare ping and a mention later stay; raw_text keeps the placeholders", async () => {
    const mentions = [
      { key: "@_user_1", id: { open_id: OUR_OPEN_ID, user_id: "" }, name: "Our Bot", tenant_key: "tenant_1" },
      { key: "@_user_2", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
    ];
    const text = received("oc_addressed", { text: "@_user_1 ask @_user_2, then @_user_1" }, { mentions });
    expect((await postPlain(text)).status).toBe(200);
    const [ctx] = await waitFor(() => contextFor("ask @Ada, then @Our Bot").length > 0 && contextFor("ask @Ada, then @Our Bot"), 15_000, "the text message's run");
    expect(ctx.event.data).toMatchObject({ raw_text: "@_user_1 ask @_user_2, then @_user_1", mentions });
    const post = { title: "", content: [[{ tag: "at", user_id: "@_user_1", user_name: "" }, { tag: "text", text: ": summarize this for " }, { tag: "at", user_id: "@_user_2", user_name: "Ada" }]] };
    expect((await postPlain(received("oc_addressed_post", post, { mentions }, "post"))).status).toBe(200);
    await waitFor(() => contextFor("summarize this for @Ada").length > 0, 15_000, "the post's run");
    expect((await postPlain(received("oc_addressed_ping", { text: "@_user_1" }, { mentions }))).status).toBe(200);
    const ping = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_addressed_ping"), 15_000, "the ping's run");
    expect(ping.input.text).toBe("@Our Bot");
  });

  it("leaves out each of its own mentions among those a message starts with, whoever is named first; nothing after them, the text is as sent", async () => {
    // Each mention has its placeholder, the bot's second one too.
    const mentions = [
      { key: "@_user_1", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
      { key: "@_user_2", id: { open_id: OUR_OPEN_ID }, name: "Our Bot", tenant_key: "tenant_1" },
      { key: "@_user_3", id: { open_id: OUR_OPEN_ID }, name: "Our Bot", tenant_key: "tenant_1" },
    ];
    const sent = {
      oc_lead_twice: received("oc_lead_twice", { text: "@_user_2 @_user_3 named twice" }, { mentions }),
      oc_lead_second: received("oc_lead_second", { text: "@_user_1, @_user_2: named second" }, { mentions }),
      oc_lead_post: received("oc_lead_post", { title: "", content: [[{ tag: "at", user_id: "@_user_1", user_name: "Ada" }, { tag: "text", text: " " }, { tag: "at", user_id: "@_user_2", user_name: "Our Bot" }, { tag: "text", text: ", in a post" }]] }, { mentions }, "post"),
      oc_lead_only: received("oc_lead_only", { text: "@_user_1 @_user_2" }, { mentions }),
    };
    for (const ev of Object.values(sent)) expect((await postPlain(ev)).status).toBe(200);
    const words = { oc_lead_twice: "named twice", oc_lead_second: "@Ada, named second", oc_lead_post: "@Ada in a post", oc_lead_only: "@Ada @Our Bot" };
    for (const [chat, text] of Object.entries(words)) {
      const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === chat), 15_000, `the run in ${chat}`);
      expect(ctx.input.text).toBe(text);
    }
  });

  it("decrypts a signed encrypted event and replies in its topic thread", async () => {
    const ev = received("oc_200", { text: "secret hello" }, { thread_id: "omt_thread_1" });
    expect((await postEncrypted(ev)).status).toBe(200);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    expect(reply.body).toMatchObject({ reply_in_thread: true, content: JSON.stringify({ text: "echo: secret hello" }) });
    expect(contextFor("secret hello")[0].conversation).toMatchObject({ conversation_id: "oc_200", thread_id: "omt_thread_1", bot_id: encrypted.botId });
  });

  it("refuses bad signatures, unsigned events, wrong keys, plain bodies and wrong tokens in encrypted mode", async () => {
    const before = runner.calls.length;
    const ev = () => received("oc_300", { text: "forged" });
    const body = encrypt(ev());
    const timestamp = String(Math.floor(Date.now() / 1000));
    const badSignature = await postRaw(encrypted.url, body, { "x-lark-request-timestamp": timestamp, "x-lark-request-nonce": "n1", "x-lark-signature": signature(timestamp, "n2", body) });
    const unsigned = await postEncrypted(ev(), { signed: false });
    const wrongKey = await postEncrypted(ev(), { key: "some-other-encrypt-key" });
    const plainBody = await postRaw(encrypted.url, JSON.stringify(ev()));
    const wrongToken = await postEncrypted({ ...ev(), header: { ...ev().header, token: "wrong" } });
    // Signed by Lark, but 13 hours ago (Lark's retries end after about 7): a captured request replayed.
    const old = String(Math.floor(Date.now() / 1000) - 13 * 3600);
    const replayed = await postRaw(encrypted.url, body, { "x-lark-request-timestamp": old, "x-lark-request-nonce": "n1", "x-lark-signature": signature(old, "n1", body) });
    expect(replayed.text).toMatch(/X-Lark-Request-Timestamp is more than 720 minutes away/);
    const encryptedToPlainBot = await postRaw(plain.url, encrypt(ev()));
    for (const res of [badSignature, unsigned, wrongKey, plainBody, wrongToken, encryptedToPlainBot, replayed]) expect(res.status).toBe(401);
    // Nothing was recorded, so nothing can run.
    expect(await host.query("SELECT 1 FROM event_log WHERE conversation_id = 'oc_300'")).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });

  it("never runs a redelivered event twice (each retry encrypted anew)", async () => {
    const ev = received("oc_400", { text: "exactly once" });
    await postEncrypted(ev);
    await waitFor(() => repliesTo(ev.event.message.message_id).length > 0);
    for (let i = 0; i < 2; i++) expect((await postEncrypted(ev)).status).toBe(200);
    // A barrier instead of a sleep: once a later message of the chat is answered, a second run of the first would have been too.
    const marker = received("oc_400", { text: "marker" });
    await postEncrypted(marker);
    await waitFor(() => repliesTo(marker.event.message.message_id).length > 0);
    expect(contextFor("exactly once")).toHaveLength(1);
    expect(repliesTo(ev.event.message.message_id)).toHaveLength(1);
  });

  it("streams into a card patched at most once a second, ending exactly on the final text", async () => {
    const ev = received("oc_500", { text: "stream alpha beta gamma delta epsilon" });
    await postPlain(ev);
    const final = "alpha beta gamma delta epsilon";
    const [card] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    expect(card.body.msg_type).toBe("interactive");
    const cardId = (card.reply!.json as any).data.message_id;
    const patches = await waitFor(() => patchesOf(cardId).some((p) => cardText(p.body.content) === final) && patchesOf(cardId), 15_000, "the final patch");
    expect(cardText(patches.at(-1)!.body.content)).toBe(final);
    for (const gap of gapsBetween([card.at, ...patches.map((p) => p.at)])) expect(gap).toBeGreaterThanOrEqual(950);
  });

  it("sends one complete text message when the agent's policy turns streaming off", async () => {
    const ev = received("oc_550", { text: "stream no streaming here" });
    await postEncrypted(ev);
    const runId = await waitFor(() => contextFor("stream no streaming here")[0]?.run_id);
    await host.waitForRun(runId);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    expect(reply.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "no streaming here" }) });
    await new Promise((r) => setTimeout(r, 300));
    expect(repliesTo(ev.event.message.message_id)).toHaveLength(1);
    expect(fake.calls.filter((c) => c.method === "PATCH" && c.path.endsWith((reply.reply!.json as any).data.message_id))).toEqual([]);
    expect(contextFor("stream no streaming here")[0].delivery).toMatchObject({ supports_streaming: false, supports_edit: true });
  });

  it.each([
    ["the app's", 429, 99991400],
    ["a chat's", 400, 230020],
  ])("waits out %s rate limit before replying again", async (_which, status, code) => {
    const ev = received(`oc_600_${code}`, { text: "busy lark" });
    throttledMessages.set(ev.event.message.message_id, { status, code });
    await postPlain(ev);
    const replies = await waitFor(() => repliesTo(ev.event.message.message_id).length >= 2 && repliesTo(ev.event.message.message_id));
    expect(replies[1].at - replies[0].at).toBeGreaterThanOrEqual(950);
    // The same uuid both times: Lark would drop a duplicate of a send whose answer was lost.
    expect(replies[0].body.uuid).toBe(replies[1].body.uuid);
  });

  it("never lets an agent's text mention everyone", async () => {
    const ev = received("oc_610", { text: '<at user_id="all"></at> and < AT user_id="all">' });
    await postPlain(ev);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    const { text } = JSON.parse(reply.body.content);
    expect(text).not.toMatch(/<\s*at\b/i);
    // It reads the same: only a zero-width space was added.
    expect(text.replaceAll("\u200b", "")).toContain('<at user_id="all"></at> and < AT user_id="all">');
  });

  it("renders an answer's Markdown in a card 2.0 markdown element, every mention in it inert; format plain shows it as before", async () => {
    const ev = received("oc_md", { text: '**bold** `<at id=all></at>` <at id=all></at> <at user_id="all"></at> 1. a_b' });
    await postPlain(ev);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    expect(statusOf(reply)).toBe(200);
    expect(reply.body.msg_type).toBe("interactive");
    expect(JSON.parse(reply.body.content)).toEqual({
      schema: "2.0",
      config: { update_multi: true },
      body: { elements: [{ tag: "markdown", content: 'echo: **bold** `<\u200bat id=all></at>` &#60;at id=all&#62;&#60;/at&#62; &#60;at user&#95;id="all"&#62;&#60;/at&#62; 1. a&#95;b' }] },
    });
    // An agent whose delivery_policy.format is plain: a text message and a card 1.0 of plain_text, as before.
    const agent = { agent_id: "lark-plain-format", name: "plain", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "oc_plain_format", bot_id: plain.botId }, delivery_policy: { format: "plain" } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    const once = received("oc_plain_format", { text: "**bold** <at id=all></at>" });
    await postPlain(once);
    const [text] = await waitFor(() => repliesTo(once.event.message.message_id).length > 0 && repliesTo(once.event.message.message_id), 15_000, "the answer");
    expect(text.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: **bold** <\u200bat id=all></at>" }) });
    const streamed = received("oc_plain_format", { text: "stream **one** two three" });
    await postPlain(streamed);
    const [card] = await waitFor(() => repliesTo(streamed.event.message.message_id).length > 0 && repliesTo(streamed.event.message.message_id), 15_000, "the card");
    const cardId = (card.reply!.json as any).data.message_id;
    await waitFor(() => patchesOf(cardId).some((p) => cardText(p.body.content) === "**one** two three"), 15_000, "the final patch");
    for (const write of [card, ...patchesOf(cardId)]) {
      expect(JSON.parse(write.body.content)).toEqual({ config: { wide_screen_mode: true, update_multi: true }, elements: [{ tag: "div", text: { tag: "plain_text", content: cardText(write.body.content) } }] });
    }
  });

  it("streams Markdown into a card 2.0 whose open code block shows closed, patched to the final text's rendering", async () => {
    const source = "**alpha**\n```js\nlet a = 1;\nlet b = 2;\nlet c = 3;\n```\ndone";
    const ev = received("oc_md_stream", { text: `stream ${source}` });
    await postPlain(ev);
    const [card] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    const cardId = (card.reply!.json as any).data.message_id;
    await waitFor(() => patchesOf(cardId).some((p) => cardText(p.body.content) === source), 20_000, "the final patch");
    // Every write (each checked by the fake as Lark would) is the one card 2.0, its Markdown rendered.
    const writes = [card, ...patchesOf(cardId)];
    for (const write of writes) {
      expect(statusOf(write)).toBe(200);
      expect(JSON.parse(write.body.content)).toMatchObject({ schema: "2.0", body: { elements: [{ tag: "markdown" }] } });
    }
    // A draft shown mid-block: the block open in the Markdown, closed in the card.
    expect(writes.some((w) => /^\*\*alpha\*\*\n```js\nlet[^`]*\n```$/.test(cardText(w.body.content)))).toBe(true);
    expect(repliesTo(ev.event.message.message_id)).toHaveLength(1);
  });

  it("renders a table in the card as GFM, which Lark shows as a table, and lists with their numbers and nesting; streamed, no draft shows a line of pipes", async () => {
    const ev = received("oc_md_table", { text: `samefinal ${TABLE_ANSWER}` });
    await postPlain(ev);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id), 15_000, "the answer");
    expect(statusOf(reply)).toBe(200);
    expect(reply.body.msg_type).toBe("interactive");
    expect(cardText(reply.body.content)).toBe(TABLE_ANSWER_LARK);
    const streamed = received("oc_md_table", { text: "stream Totals:\n| Item | Qty |\n|---|--:|\n| pens | 3 |\n| paper | 120 |\ndone" });
    await postPlain(streamed);
    const [card] = await waitFor(() => repliesTo(streamed.event.message.message_id).length > 0 && repliesTo(streamed.event.message.message_id), 15_000, "the card");
    const cardId = (card.reply!.json as any).data.message_id;
    const final = "Totals:\n\n| Item | Qty |\n| --- | ---: |\n| pens | 3 |\n| paper | 120 |\n\ndone";
    await waitFor(() => patchesOf(cardId).some((p) => cardText(p.body.content) === final), 20_000, "the final patch");
    const writes = [card, ...patchesOf(cardId)];
    expect(writes.length).toBeGreaterThan(2);
    for (const write of writes) {
      expect(statusOf(write)).toBe(200);
      expect(cardText(write.body.content)).not.toContain("&#124;");
    }
  });

  it("sends the same text again as it is when Lark refuses its Markdown card, a send and each edit, and the trail says so", async () => {
    const ev = received("oc_md_refused", { text: "stream **one** two three four five" });
    refusingMarkdown.add(ev.event.message.message_id);
    await postPlain(ev);
    const source = "**one** two three four five";
    const plainCard = (text: string) => ({ schema: "2.0", config: { update_multi: true }, body: { elements: [{ tag: "div", text: { tag: "plain_text", content: text } }] } });
    const sends = await waitFor(() => repliesTo(ev.event.message.message_id).length >= 2 && repliesTo(ev.event.message.message_id), 15_000, "the card, plain");
    const cardId = (sends[1].reply!.json as any).data.message_id;
    await waitFor(() => patchesOf(cardId).some((p) => statusOf(p) === 200 && cardText(p.body.content) === source), 20_000, "the final text, plain");
    expect(sends.map((c) => [statusOf(c), JSON.parse(c.body.content).body.elements[0].tag])).toEqual([
      [400, "markdown"],
      [200, "div"],
    ]);
    expect(JSON.parse(sends[1].body.content)).toEqual(plainCard("**one**"));
    // Every Markdown patch refused was made again, at once, as the same text plain.
    const patches = patchesOf(cardId);
    for (const [i, patch] of patches.entries()) {
      if (statusOf(patch) === 400) expect(JSON.parse(patches[i + 1].body.content)).toEqual(plainCard(cardText(patch.body.content)));
    }
    expect(patches.filter((p) => statusOf(p) === 400).length).toBeGreaterThan(0);
    expect(patches.filter((p) => statusOf(p) === 200).length).toBe(patches.filter((p) => statusOf(p) === 400).length);
    const runId = contextFor("stream **one** two three four five")[0].run_id;
    await host.waitForRun(runId);
    const trail = await waitFor(async () => {
      const rows = (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
      return rows.some((r) => r.type === "delivery.succeeded" && r.operation === "edit") && rows;
    });
    expect(trail.filter((r) => r.operation === "send").map(({ type, attempt, code, will_retry, format }) => ({ type, attempt, code, will_retry, format }))).toEqual([
      { type: "delivery.attempted", attempt: 1, code: undefined, will_retry: undefined, format: undefined },
      { type: "delivery.failed", attempt: 1, code: "lark_230099", will_retry: true, format: undefined },
      { type: "delivery.attempted", attempt: 2, code: undefined, will_retry: undefined, format: "plain" },
      { type: "delivery.succeeded", attempt: 2, code: undefined, will_retry: undefined, format: "plain" },
    ]);
    // Sent once (streaming off): the card refused, the text goes as a text message, as it is.
    const once = received("oc_md_refused_once", { text: "**bold**" });
    refusingMarkdown.add(once.event.message.message_id);
    await postEncrypted(once);
    const replies = await waitFor(() => repliesTo(once.event.message.message_id).length >= 2 && repliesTo(once.event.message.message_id), 15_000, "the text, plain");
    expect(replies.map((r) => [statusOf(r), r.body.msg_type])).toEqual([
      [400, "interactive"],
      [200, "text"],
    ]);
    expect(JSON.parse(replies[1].body.content)).toEqual({ text: "echo: **bold**" });
  });

  it("gives the runner the message a reply answers, read by its parent_id: its sender, its words with mentions by name, its files after the message's own", async () => {
    const sender = { id: "ou_bob", id_type: "open_id", sender_type: "user", tenant_key: "tenant_1" };
    readableMessages.set("om_bobs_pdf", { message_id: "om_bobs_pdf", msg_type: "file", chat_id: "oc_reply", deleted: false, updated: false, sender, body: { content: JSON.stringify({ file_key: "file_v2_q3", file_name: "q3.pdf" }) }, mentions: null, upper_message_id: null });
    const mentions = [{ key: "@_user_1", id: { open_id: OUR_OPEN_ID }, name: "Our Bot", tenant_key: "tenant_1" }];
    const asking = received("oc_reply", { text: "@_user_1 summarise this" }, { mentions, parent_id: "om_bobs_pdf", root_id: "om_bobs_pdf" });
    expect((await postPlain(asking)).status).toBe(200);
    await waitFor(() => repliesTo(asking.event.message.message_id).length > 0, 15_000, "the answer");
    const [ctx] = contextFor("summarise this");
    const [read] = fake.calls.filter((c) => c.method === "GET" && c.path === "/open-apis/im/v1/messages/om_bobs_pdf");
    expect(read.headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
    // The file is the replied message's resource, fetched as the message's own would be.
    expect(fake.calls.filter((c) => c.path === "/open-apis/im/v1/messages/om_bobs_pdf/resources/file_v2_q3").map((c) => c.query.get("type"))).toEqual(["file"]);
    const [pdf] = ctx.input.attachments;
    expect(ctx.input.attachments).toEqual([expect.objectContaining({ artifact_type: "file", name: "q3.pdf", size_bytes: PDF.length })]);
    expect(await host.r2Object(`artifacts/${pdf.artifact_id}`)).toEqual(PDF);
    expect(ctx.event.data.reply_to).toEqual({ message_id: "om_bobs_pdf", actor: { actor_type: "user", actor_id: "ou_bob", actor_name: null }, text: null, quote: null, attachments: [pdf], unavailable: null });
    // Words: the API's mentions name their user by a plain id; the runner reads the name, as in a received message.
    readableMessages.set("om_cys_note", { message_id: "om_cys_note", msg_type: "text", sender: { ...sender, id: "ou_cy" }, body: { content: JSON.stringify({ text: "@_user_1 can you check the numbers?" }) }, mentions: [{ key: "@_user_1", id: "ou_ada", id_type: "open_id", name: "Ada" }] });
    const words = received("oc_reply", { text: "what does Cy mean?" }, { parent_id: "om_cys_note", root_id: "om_cys_note" });
    await postPlain(words);
    await waitFor(() => repliesTo(words.event.message.message_id).length > 0, 15_000, "the answer");
    const [said] = contextFor("what does Cy mean?");
    expect(said.input.attachments).toEqual([]);
    expect(said.event.data.reply_to).toEqual({ message_id: "om_cys_note", actor: { actor_type: "user", actor_id: "ou_cy", actor_name: null }, text: "@Ada can you check the numbers?", quote: null, attachments: [], unavailable: null });
    expect(contextFor("hello lark")[0].event.data.reply_to, "a message that replies to nothing").toBeNull();
  });
});

describe("Lark: what this file sent and was answered", () => {
  it("keeps the bot's credentials out of every answer, record, stored payload and log line", () => platform.keepsSecretsOut());
});
