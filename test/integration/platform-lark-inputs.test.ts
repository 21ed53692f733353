import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { callHostApi, deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";
import { useLarkPlatform, type LarkPlatform } from "../support/lark-platform";

/** What a Lark event gives the runner: joins, images, the messages replies answer, recalls. */
const platform = useLarkPlatform();
const { APP_ID, APP_SECRET, VERIFICATION_TOKEN, TENANT_TOKEN, IMAGE, SLOW_PARENT, SLOW_APP_ID, SLOW_TENANT_TOKEN, recalledMessages, readableMessages, heldResources, plain, pause, postRaw, postPlain, event, received, repliesTo, patchesOf, statusOf, contextFor, cardText } = platform;
let host: LarkPlatform["host"];
let fake: LarkPlatform["fake"];
let runner: LarkPlatform["runner"];
beforeAll(() => void ({ host, fake, runner } = platform));

describe("Lark/Feishu: event subscription in, Open API out", () => {
  it("delivers a welcome for a member join as a new message in the chat", async () => {
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-welcome", scope: { type: "bot", id: plain.botId }, eventTypes: ["group.member_joined"] });
    const added = event("im.chat.member.user.added_v1", { chat_id: "oc_620", operator_id: { open_id: "ou_op" }, users: [{ name: "Cy", tenant_key: "tenant_1", user_id: { open_id: "ou_cy" } }] });
    expect((await postPlain(added)).status).toBe(200);
    const created = () => fake.calls.filter((c) => c.path === "/open-apis/im/v1/messages" && c.body?.receive_id === "oc_620");
    const [welcome] = await waitFor(() => created().length > 0 && created(), 10_000, "the welcome");
    expect(welcome.query.get("receive_id_type")).toBe("chat_id");
    expect(welcome.body).toMatchObject({ msg_type: expect.any(String), uuid: expect.any(String) });
  });

  it("answers within Lark's 3 s when its API is slow: the time spent reading the bot's own open_id counts against the file downloads, not on top of them", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: SLOW_APP_ID, app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN } });
    expect(created.status).toBe(201);
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-slow", scope: { type: "bot", id: created.body.bot_id } });
    const mentions = [{ key: "@_user_1", id: { open_id: "ou_slow_bot" }, name: "Slow Bot", tenant_key: "tenant_1" }];
    const post = { title: "", content: [[{ tag: "at", user_id: "@_user_1", user_name: "" }, { tag: "text", text: " what is in this picture?" }], [{ tag: "img", image_key: "img_slow" }]] };
    const ev = received("oc_slow_api", post, { mentions }, "post");
    const started = Date.now();
    const res = await postRaw(created.body.webhook_url, JSON.stringify({ ...ev, header: { ...ev.header, app_id: SLOW_APP_ID } }));
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    // Lark counts a webhook not answered within 3 s as failed, and sends it again.
    expect(took).toBeLessThan(3_000);
    expect(fake.calls.filter((c) => c.path === "/open-apis/bot/v3/info" && c.headers.authorization === `Bearer ${SLOW_TENANT_TOKEN}`)).toHaveLength(1);
    // The words still run, read as addressed to the bot; the picture that could not come in time is said so.
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_slow_api"), 15_000, "the run");
    expect(ctx.input.text).toBe("what is in this picture?");
    expect(ctx.input.attachments).toEqual([]);
    const recorded = await host.admin("GET", `/v1/events/${encodeURIComponent(ctx.event.event_id)}`);
    expect(recorded.body.metadata.attachments_unavailable).toEqual(expect.any(String));
  });

  it("downloads an image message's resource into an input artifact", async () => {
    const ev = received("oc_700", { image_key: "img_1" }, {}, "image");
    await postPlain(ev);
    await waitFor(() => repliesTo(ev.event.message.message_id).length > 0);
    const download = fake.calls.find((c) => c.path.endsWith("/resources/img_1"))!;
    expect(download.query.get("type")).toBe("image");
    expect(download.headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
    const ctx = runner.contexts.find((c) => c.event.event_id === `lark:${plain.botId}:${ev.header.event_id}`);
    const [ref] = ctx.input.attachments;
    expect(ref).toMatchObject({ artifact_type: "image", mime_type: "image/png", size_bytes: IMAGE.length });
    expect(ctx.input.contents).toEqual([{ type: "image", artifact_id: ref.artifact_id }]);
  });

  it("runs a reply whose message cannot be read, saying why as for a file left out: Lark refuses it, or does not answer in the time Lark's 3 s leave", async () => {
    const refused = received("oc_reply_unread", { text: "what is this about?" }, { parent_id: "om_not_readable", root_id: "om_not_readable" });
    expect((await postPlain(refused)).status).toBe(200);
    await waitFor(() => repliesTo(refused.event.message.message_id).length > 0, 15_000, "the answer");
    const [ctx] = contextFor("what is this about?");
    expect(ctx.event.data.reply_to).toEqual({ message_id: "om_not_readable", actor: null, text: null, quote: null, attachments: [], unavailable: expect.stringMatching(/permissions/) });
    const recorded = await host.admin("GET", `/v1/events/${encodeURIComponent(ctx.event.event_id)}`);
    expect(recorded.body.metadata.attachments_unavailable).toMatch(/^the replied message om_not_readable \(.*permissions/);
    // Slow: the webhook is answered in time, and the message's own image still comes.
    const slow = received("oc_reply_slow", { image_key: "img_1" }, { parent_id: SLOW_PARENT, root_id: SLOW_PARENT }, "image");
    const started = Date.now();
    expect((await postPlain(slow)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(3_000);
    const late = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_reply_slow"), 15_000, "the run");
    expect(late.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", size_bytes: IMAGE.length })]);
    expect(late.event.data.reply_to).toMatchObject({ message_id: SLOW_PARENT, text: null, attachments: [], unavailable: expect.stringMatching(/no answer within/) });
  });

  it("reads a reply to a message the bot received as recorded: in a topic, no read of its root nor a second download of the root's image; one expired since is read and fetched again, one recalled has nothing", async () => {
    const topic = { thread_id: "omt_reuse" };
    const root = received("oc_reuse", { image_key: "img_1" }, topic, "image");
    const rootId = root.event.message.message_id;
    const inTopic = () => runner.contexts.filter((c) => c.conversation.conversation_id === "oc_reuse");
    const ran = (messageId: string) => waitFor(() => inTopic().find((c) => c.event.data.message_id === messageId), 15_000, `the run of ${messageId}`);
    const reads = (messageId: string) => fake.calls.filter((c) => c.method === "GET" && c.path === `/open-apis/im/v1/messages/${messageId}`).length;
    const downloads = () => fake.calls.filter((c) => c.path === `/open-apis/im/v1/messages/${rootId}/resources/img_1`).length;
    expect((await postPlain(root)).status).toBe(200);
    const [stored] = (await ran(rootId)).input.attachments;
    expect(downloads()).toBe(1);

    const asking = received("oc_reuse", { text: "what is in it?" }, { ...topic, parent_id: rootId, root_id: rootId });
    expect((await postPlain(asking)).status).toBe(200);
    const ctx = await ran(asking.event.message.message_id);
    expect([reads(rootId), downloads()]).toEqual([0, 1]);
    expect(ctx.input.attachments).toEqual([stored]);
    expect(ctx.event.data.reply_to).toEqual({ message_id: rootId, actor: { actor_type: "user", actor_id: "ou_user_1", actor_name: null }, text: null, quote: null, attachments: [stored], unavailable: null });
    // A reply to that reply: its words as a read gives them, none of the files it had from its own replied message.
    const mentions = [{ key: "@_user_1", id: { open_id: "ou_ada" }, name: "Ada" }];
    const naming = received("oc_reuse", { text: "@_user_1 knows" }, { ...topic, mentions, parent_id: rootId, root_id: rootId });
    expect((await postPlain(naming)).status).toBe(200);
    await ran(naming.event.message.message_id);
    const deeper = received("oc_reuse", { text: "who knows?" }, { ...topic, parent_id: naming.event.message.message_id, root_id: rootId });
    expect((await postPlain(deeper)).status).toBe(200);
    const said = await ran(deeper.event.message.message_id);
    expect(reads(naming.event.message.message_id)).toBe(0);
    expect(said.input.attachments).toEqual([]);
    expect(said.event.data.reply_to).toMatchObject({ message_id: naming.event.message.message_id, text: "@Ada knows", attachments: [], unavailable: null });

    // Expired since: read and downloaded as for a message never received, another artifact.
    readableMessages.set(rootId, { message_id: rootId, msg_type: "image", chat_id: "oc_reuse", deleted: false, sender: { id: "ou_user_1", id_type: "open_id", sender_type: "user" }, body: { content: JSON.stringify({ image_key: "img_1" }) } });
    await host.query("UPDATE artifact SET expires_at = ? WHERE artifact_id = ?", [Date.now() - 1_000, stored.artifact_id]);
    const later = received("oc_reuse", { text: "and now?" }, { ...topic, parent_id: rootId, root_id: rootId });
    expect((await postPlain(later)).status).toBe(200);
    const again = await ran(later.event.message.message_id);
    expect([reads(rootId), downloads()]).toEqual([1, 2]);
    expect(again.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", size_bytes: IMAGE.length })]);
    expect(again.input.attachments[0].artifact_id).not.toBe(stored.artifact_id);
    expect(again.event.data.reply_to.attachments).toEqual(again.input.attachments);

    // Recalled: its files went with it, and the host knows so without asking Lark (which still gives it here).
    expect((await postPlain(event("im.message.recalled_v1", { message_id: rootId, chat_id: "oc_reuse", recall_time: String(Date.now()), recall_type: "message_owner" }))).status).toBe(200);
    const gone = received("oc_reuse", { text: "where did it go?" }, { ...topic, parent_id: rootId, root_id: rootId });
    expect((await postPlain(gone)).status).toBe(200);
    const none = await ran(gone.event.message.message_id);
    expect([reads(rootId), downloads()]).toEqual([1, 2]);
    expect(none.input.attachments).toEqual([]);
    expect(none.event.data.reply_to).toEqual({ message_id: rootId, actor: null, text: null, quote: null, attachments: [], unavailable: "it was recalled" });
  });

  it("leaves no blob of a reply's own image behind when the database fails the look-up of its replied message's stored file, made after the image was stored alongside", async () => {
    const root = received("oc_reuse_blip", { image_key: "img_1" }, {}, "image");
    const rootId = root.event.message.message_id;
    expect((await postPlain(root)).status).toBe(200);
    const [stored] = (await waitFor(() => runner.contexts.find((c) => c.event.data.message_id === rootId), 15_000, "the root's run")).input.attachments;
    const unnamed = async () => {
      const named = new Set((await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).map((r) => r.r2_key));
      return (await host.r2Keys("artifacts/")).filter((k) => !named.has(k));
    };
    const before = new Set(await unnamed());
    const downloads = () => fake.calls.filter((c) => c.path.endsWith("/resources/img_1")).length;
    const fetched = downloads();
    // Its own image (stored alongside the replied message's look-up), then the stored file it re-uses, looked up by id: refused.
    host.databaseOutage({ queries: 1, matching: stored.artifact_id });
    try {
      expect((await postPlain(received("oc_reuse_blip", { image_key: "img_1" }, { parent_id: rootId }, "image"))).status).toBeGreaterThanOrEqual(500);
    } finally {
      host.databaseOutage(false);
    }
    expect(downloads()).toBe(fetched + 1);
    expect((await unnamed()).filter((k) => !before.has(k))).toEqual([]);
  });

  it("reads a reply to the bot's own answer as the host delivered it, without reading Lark: a streamed card's final words, a text's words and the answer's file, the file's own message that file", async () => {
    const reads = (messageId: string) => fake.calls.filter((c) => c.method === "GET" && c.path === `/open-apis/im/v1/messages/${messageId}`).length;
    const ran = (messageId: string) => waitFor(() => runner.contexts.find((c) => c.event.data.message_id === messageId), 15_000, `the run of ${messageId}`);
    /** Every call made for the platform message recorded: the trail is written after the call. */
    const recorded = (messageId: string, calls: number) =>
      waitFor(async () => (await host.query("SELECT seq FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [messageId])).length >= calls, 15_000, `the trail of ${messageId}`);
    const ours = { actor_type: "bot", actor_id: APP_ID, actor_name: null };

    // A streamed answer is a card, which Lark gives no words of: its words are the transcript's final text.
    const asked = received("oc_own_answer", { text: "stream alpha beta gamma" });
    expect((await postPlain(asked)).status).toBe(200);
    const card = (await waitFor(() => repliesTo(asked.event.message.message_id)[0]?.reply?.json as any)).data.message_id as string;
    const patches = await waitFor(() => patchesOf(card).some((p) => cardText(p.body.content) === "alpha beta gamma") && patchesOf(card), 15_000, "the final patch");
    await recorded(card, 1 + patches.length);
    const shorter = received("oc_own_answer", { text: "make it shorter" }, { parent_id: card, root_id: card });
    expect((await postPlain(shorter)).status).toBe(200);
    const ctx = await ran(shorter.event.message.message_id);
    expect(reads(card)).toBe(0);
    expect(ctx.event.data.reply_to).toEqual({ message_id: card, actor: ours, text: "alpha beta gamma", quote: null, attachments: [], unavailable: null });

    // An answer with a file: its text message brings the answer's words and file, the file's message that file alone.
    const attach = received("oc_own_answer", { text: "attach chart.png" });
    expect((await postPlain(attach)).status).toBe(200);
    const [text, image] = (await waitFor(() => repliesTo(attach.event.message.message_id).length >= 2 && repliesTo(attach.event.message.message_id))).map((c) => (c.reply!.json as any).data.message_id as string);
    const runId = (await ran(attach.event.message.message_id)).run_id;
    const [made] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);
    for (const [replied, words] of [[text, "here is chart.png"], [image, null]] as const) {
      await recorded(replied, 1);
      const asking = received("oc_own_answer", { text: `and ${replied}?` }, { parent_id: replied, root_id: replied });
      expect((await postPlain(asking)).status).toBe(200);
      const said = await ran(asking.event.message.message_id);
      expect(reads(replied)).toBe(0);
      expect(said.input.attachments).toEqual([expect.objectContaining({ artifact_id: made.artifact_id, artifact_type: "image", name: "chart.png" })]);
      expect(said.event.data.reply_to).toEqual({ message_id: replied, actor: ours, text: words, quote: null, attachments: said.input.attachments, unavailable: null });
    }
  });

  it("reads a reply in a topic thread opened on the bot's main-chat answer as the host delivered it (the chat's record), without reading Lark", async () => {
    const reads = (messageId: string) => fake.calls.filter((c) => c.method === "GET" && c.path === `/open-apis/im/v1/messages/${messageId}`).length;
    const asked = received("oc_own_topic", { text: "stream one two three" });
    expect((await postPlain(asked)).status).toBe(200);
    const card = (await waitFor(() => repliesTo(asked.event.message.message_id)[0]?.reply?.json as any)).data.message_id as string;
    await waitFor(() => patchesOf(card).some((p) => cardText(p.body.content) === "one two three"), 15_000, "the final patch");
    await waitFor(async () => (await host.query("SELECT seq FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [card])).length >= 1 + patchesOf(card).length, 15_000, "the trail");
    // "Reply in thread": a topic of its own, whose root (every reply's parent) is the answer, recorded in the chat's conversation.
    const inThread = received("oc_own_topic", { text: "make it shorter" }, { thread_id: "omt_own_topic", parent_id: card, root_id: card });
    expect((await postPlain(inThread)).status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.event.data.message_id === inThread.event.message.message_id), 15_000, "the run");
    expect(ctx.conversation.thread_id).toBe("omt_own_topic");
    expect(reads(card)).toBe(0);
    expect(ctx.event.data.reply_to).toEqual({ message_id: card, actor: { actor_type: "bot", actor_id: APP_ID, actor_name: null }, text: "one two three", quote: null, attachments: [], unavailable: null });
  });

  it("keeps a file a reply re-used as long as one it brought itself, past its own message's expiry; a recall of that message meanwhile still takes it", async () => {
    const root = received("oc_reuse_ttl", { image_key: "img_1" }, {}, "image");
    const rootId = root.event.message.message_id;
    const ran = (messageId: string) => waitFor(() => runner.contexts.find((c) => c.event.data.message_id === messageId), 15_000, `the run of ${messageId}`);
    const expiryOf = async (artifactId: string) => Number((await host.query<{ expires_at: number }>("SELECT expires_at FROM artifact WHERE artifact_id = ?", [artifactId]))[0]?.expires_at);
    expect((await postPlain(root)).status).toBe(200);
    const [stored] = (await ran(rootId)).input.attachments;
    // Near the end of its life (its TTL almost spent), yet unexpired: re-used.
    const endsAt = Date.now() + 1_500;
    await host.query("UPDATE artifact SET expires_at = ? WHERE artifact_id = ?", [endsAt, stored.artifact_id]);
    const asking = received("oc_reuse_ttl", { text: "still there?" }, { parent_id: rootId, root_id: rootId });
    expect((await postPlain(asking)).status).toBe(200);
    expect((await ran(asking.event.message.message_id)).input.attachments).toEqual([stored]);

    // Past the message's own expiry the retention sweep leaves it: stored for the reply, it would last the TTL.
    await pause(Math.max(0, endsAt - Date.now()) + 100);
    await host.triggerScheduled();
    expect(await host.r2Object(`artifacts/${stored.artifact_id}`)).not.toBeNull();
    expect(await expiryOf(stored.artifact_id)).toBeGreaterThan(Date.now() + 29 * 24 * 3600 * 1000);

    // Recalled while a reply re-using it is stored (its own image still downloading): the reply does not keep it.
    const gate = deferred();
    heldResources.set("img_held", gate);
    const late = received("oc_reuse_ttl", { image_key: "img_held" }, { parent_id: rootId, root_id: rootId }, "image");
    const posting = postPlain(late);
    await waitFor(() => fake.calls.some((c) => c.path.endsWith("/resources/img_held")), 5_000, "the reply's own image asked for");
    expect((await postPlain(event("im.message.recalled_v1", { message_id: rootId, chat_id: "oc_reuse_ttl", recall_time: String(Date.now()), recall_type: "message_owner" }))).status).toBe(200);
    gate.resolve();
    expect((await posting).status).toBe(200);
    await ran(late.event.message.message_id);
    expect(await expiryOf(stored.artifact_id)).toBeLessThanOrEqual(Date.now());
    expect(await host.r2Object(`artifacts/${stored.artifact_id}`)).toBeNull();
  });

  it("records recalls and member joins, and acknowledges events it does not handle", async () => {
    const recalled = event("im.message.recalled_v1", { message_id: "om_gone", chat_id: "oc_800", recall_time: String(Date.now()), recall_type: "message_owner" });
    const added = event("im.chat.member.user.added_v1", { chat_id: "oc_800", operator_id: { open_id: "ou_op" }, users: [{ name: "Bob", tenant_key: "tenant_1", user_id: { open_id: "ou_bob", union_id: "on_bob" } }] });
    const read = event("im.message.message_read_v1", { reader: { reader_id: { open_id: "ou_user_1" } }, message_id_list: ["om_1"] });
    for (const ev of [recalled, added, read]) expect((await postPlain(ev)).status).toBe(200);
    const rows = await host.query<{ event_type: string; source_event_type: string }>("SELECT event_type, source_event_type FROM event_log WHERE event_id IN (?, ?, ?) ORDER BY seq", [
      `lark:${plain.botId}:${recalled.header.event_id}`,
      `lark:${plain.botId}:${added.header.event_id}:ou_bob`,
      `lark:${plain.botId}:${read.header.event_id}`,
    ]);
    expect(rows).toEqual([
      { event_type: "message.recalled", source_event_type: "im.message.recalled_v1" },
      { event_type: "group.member_joined", source_event_type: "im.chat.member.user.added_v1" },
      { event_type: "platform.unhandled", source_event_type: "im.message.message_read_v1" },
    ]);
  });

  it("withdraws a message recalled while it waits its turn in a topic thread (the recall names no thread): its run ends cancelled, never answered", async () => {
    const busy = received("oc_810", { text: "sleep 1500" }, { thread_id: "omt_810" });
    await postPlain(busy);
    await waitFor(() => contextFor("sleep 1500").length > 0, 10_000, "the busy run");
    const waiting = received("oc_810", { text: "never mind this" }, { thread_id: "omt_810" });
    await postPlain(waiting);
    const after = received("oc_810", { text: "but this" }, { thread_id: "omt_810" });
    await postPlain(after);
    const recall = event("im.message.recalled_v1", { message_id: waiting.event.message.message_id, chat_id: "oc_810", recall_time: String(Date.now()), recall_type: "message_owner" });
    expect((await postPlain(recall)).status).toBe(200);
    const [run] = await host.query<{ status: string; error_code: string }>("SELECT status, error_code FROM run WHERE event_id = ?", [`lark:${plain.botId}:${waiting.header.event_id}`]);
    expect(run).toEqual({ status: "cancelled", error_code: "cancelled" });
    await waitFor(() => repliesTo(after.event.message.message_id).length > 0, 10_000, "the message after it answered");
    expect(contextFor("never mind this")).toEqual([]);
    expect(repliesTo(waiting.event.message.message_id)).toEqual([]);
  });

  it("steer with debounce: the waiting run's own message recalled while it holds later ones: the first of those takes its place, its answer replying to it", async () => {
    // A runner that steers: it answers its message and what it pulls, in one reply.
    const steerer = await startAdHocRunner({
      name: "lark-steerer",
      runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: false, steering: true }, permissions: {} }],
      async onRun({ body }, res) {
        const ctx = body.context;
        const pulled = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
        resultWriter(res, ctx.run_id).reply(`re: ${[ctx.input.text, ...pulled.body.data.items.map((i: any) => i.input.text)].join("+")}`);
      },
    });
    try {
      expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
      await putAgent(host, { agent_id: "lark-burst", runner_id: steerer.runnerId(), scope: { type: "conversation", id: "oc_burst", bot_id: plain.botId }, concurrency: { strategy: "steer", debounce_ms: 1500 }, delivery_policy: { streaming: false } });
      const [first, second, third] = ["first", "second", "third"].map((text) => received("oc_burst", { text }));
      for (const ev of [first, second, third]) expect((await postPlain(ev)).status).toBe(200);
      recalledMessages.add(first.event.message.message_id);
      const recall = event("im.message.recalled_v1", { message_id: first.event.message.message_id, chat_id: "oc_burst", recall_time: String(Date.now()), recall_type: "message_owner" });
      expect((await postPlain(recall)).status).toBe(200);
      const [reply] = await waitFor(() => repliesTo(second.event.message.message_id).length > 0 && repliesTo(second.event.message.message_id), 15_000, "the answer to the second message");
      expect(JSON.parse(reply.body.content)).toEqual({ text: "re: second+third" });
      expect(repliesTo(first.event.message.message_id)).toEqual([]);
    } finally {
      await steerer.close();
    }
  });

  it("answers a message recalled once its runner had it: in its topic thread (a reply to the thread's root), else in the chat", async () => {
    const chatPosts = (chatId: string) => fake.calls.filter((c) => c.path === "/open-apis/im/v1/messages" && c.body?.receive_id === chatId);
    // Recalled while the run was going: the reply to it is refused.
    const ev = received("oc_recalled", { text: "recalled meanwhile" });
    recalledMessages.add(ev.event.message.message_id);
    await postPlain(ev);
    const [posted] = await waitFor(() => chatPosts("oc_recalled").length > 0 && chatPosts("oc_recalled"), 15_000, "the answer in the chat");
    expect(posted.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: recalled meanwhile" }) });
    expect(repliesTo(ev.event.message.message_id).map(statusOf)).toEqual([400]);
    const runId = contextFor("recalled meanwhile")[0].run_id;
    const outcome = await waitFor(async () => {
      const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId]);
      return rows.map((r) => JSON.parse(r.data_json))[0];
    }, 15_000, "the delivery record");
    expect(outcome).toMatchObject({ operation: "send", message_id: (posted.reply!.json as any).data.message_id });
    // In a topic thread: the answer stays in the thread, a reply to its root.
    const inThread = received("oc_recalled_thread", { text: "recalled in a thread" }, { thread_id: "omt_recalled", root_id: "om_recalled_root", parent_id: "om_recalled_root" });
    recalledMessages.add(inThread.event.message.message_id);
    await postPlain(inThread);
    const [toRoot] = await waitFor(() => repliesTo("om_recalled_root").length > 0 && repliesTo("om_recalled_root"), 15_000, "the answer in the thread");
    expect(toRoot.body).toMatchObject({ reply_in_thread: true, content: JSON.stringify({ text: "echo: recalled in a thread" }) });
    expect(statusOf(toRoot)).toBe(200);
    expect(chatPosts("oc_recalled_thread")).toEqual([]);
  });
});

describe("Lark: what this file sent and was answered", () => {
  it("keeps the bot's credentials out of every answer, record, stored payload and log line", () => platform.keepsSecretsOut());
});
