import { PRESS_REPEAT_WINDOW_MS } from "../../durable-objects/repeated-presses";
import { beforeAll, describe, expect, it } from "vitest";
import { recordedAnswer } from "../support/host";
import { settledRefusals } from "../support/settled-refusals";
import { addTelegramBot, waitFor } from "../support/fake-platform";
import { telegramHtmlProblem } from "../support/telegram-html";
import { TABLE_ANSWER, TABLE_ANSWER_TELEGRAM } from "../support/markdown-sample";
import { useTelegramPlatform, type TelegramPlatform } from "../support/telegram-platform";

/** Telegram updates beyond one person's message (joins, presses, other bots, commands), the bot's view, answers' Markdown. */
const platform = useTelegramPlatform();
const { state, BOT_TOKEN, SECRET_TOKEN, BLOCKED_CHAT, KICKED_CHAT, OUR_USERNAME, REFUSING_HTML, update, post, sendsTo, editsOf, contextFor } = platform;
let host: TelegramPlatform["host"];
let fake: TelegramPlatform["fake"];
let runner: TelegramPlatform["runner"];
let botId: string;
beforeAll(() => void ({ host, fake, runner, botId } = platform));

describe("Telegram: webhook in, reply out", () => {
  it("records joins as group.member_joined and other updates as unhandled, acknowledging both", async () => {
    const joined = update("-101000", { new_chat_members: [{ id: 7, is_bot: false, first_name: "Bob" }, { id: 8, is_bot: false, first_name: "Cy" }] });
    expect((await post(joined)).status).toBe(200);
    const rows = await host.query<{ event_type: string; actor_id: string; source_event_type: string }>("SELECT event_type, actor_id, source_event_type FROM event_log WHERE conversation_id = '-101000' ORDER BY seq");
    expect(rows).toEqual([
      { event_type: "group.member_joined", actor_id: "7", source_event_type: "new_chat_members" },
      { event_type: "group.member_joined", actor_id: "8", source_event_type: "new_chat_members" },
    ]);
    // A press on a message sent in inline mode names no chat to answer in: recorded, and closed by the webhook's answer.
    const callback = { update_id: ++state.updateId, callback_query: { id: "cb1", from: { id: 42, first_name: "Ada" }, inline_message_id: "AAE1", chat_instance: "-5", data: "x" } };
    expect(await post(callback)).toEqual({ status: 200, body: { method: "answerCallbackQuery", callback_query_id: "cb1", text: "This interaction is not supported." } });
    const [row] = await host.query<{ event_type: string; source_event_type: string; raw_ref: string }>("SELECT event_type, source_event_type, raw_ref FROM event_log WHERE event_id = ?", [`telegram:${botId}:${callback.update_id}`]);
    expect(row).toMatchObject({ event_type: "platform.unhandled", source_event_type: "callback_query" });
    expect(row.raw_ref).toMatch(/^raw\/telegram\//);
    // No agent took the joins: the bot's view says so, and why, without knowing the chat.
    const { last_unbound_event: unbound } = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body;
    expect(unbound).toEqual({
      at: expect.any(String),
      event_id: expect.stringMatching(new RegExp(`^telegram:${botId}:${joined.update_id}`)),
      event_type: "group.member_joined",
      conversation_id: "-101000",
      thread_id: null,
      reason: `agent tg-agent (scope {"type":"bot","id":"${botId}"}) takes message.received, not group.member_joined`,
    });
    // Verified but unreadable (no update_id): still recorded and acknowledged, so Telegram does not retry it forever.
    expect(await post({ something: "else" })).toEqual({ status: 200, body: { ok: true } });
    const odd = await host.query("SELECT 1 FROM event_log WHERE event_type = 'platform.unhandled' AND source_event_type = 'unknown' AND bot_id = ?", [botId]);
    expect(odd).toHaveLength(1);
  });

  it("runs a press on an inline keyboard button as a message: its callback_data the input, the answer quoting the message it is on, in its topic; the webhook's answer closes the press", async () => {
    const keyboard = { inline_keyboard: [[{ text: "Yes, ship it", callback_data: "deploy:yes" }, { text: "No", callback_data: "deploy:no" }]] };
    const message = { message_id: 4321, date: 1_700_000_000, chat: { id: -101900, type: "supergroup", title: "Ops" }, message_thread_id: 88, is_topic_message: true, from: { id: 123456, is_bot: true, first_name: "Test", username: OUR_USERNAME }, text: "Deploy?", reply_markup: keyboard };
    const press = { update_id: ++state.updateId, callback_query: { id: "4382bfdwdsb323b2d9", from: { id: 42, is_bot: false, first_name: "Ada", username: "ada" }, message, chat_instance: "-8", data: "deploy:yes" } };
    // Telegram runs the method the answer names: the button's progress bar ends, with no notice as an answer is coming.
    expect(await post(press)).toEqual({ status: 200, body: { method: "answerCallbackQuery", callback_query_id: "4382bfdwdsb323b2d9" } });
    const [send] = await waitFor(() => sendsTo("-101900").length > 0 && sendsTo("-101900"), 10_000, "the press's answer");
    expect(send.body).toMatchObject({ text: "echo: deploy:yes", message_thread_id: 88, reply_parameters: { message_id: 4321 } });
    const [ctx] = contextFor("deploy:yes");
    expect(ctx.conversation).toMatchObject({ conversation_id: "-101900", thread_id: "88" });
    expect(ctx.actor).toMatchObject({ actor_type: "user", actor_id: "42", actor_name: "Ada" });
    expect(ctx.event).toMatchObject({ event_type: "message.received", source_event_type: "callback_query" });
    expect(ctx.event.data).toMatchObject({ callback_message_id: 4321, component: { custom_id: "deploy:yes", component_type: "callback_button", label: "Yes, ship it" } });
    // The pressed message is the bot's, not one the user sent: never recorded as theirs (an edit of it, the chat's order).
    expect(ctx.event.data.message_id).toBeUndefined();
    // Sent again, it runs nothing more, and the press is closed all the same.
    expect(await post(press)).toEqual({ status: 200, body: { method: "answerCallbackQuery", callback_query_id: "4382bfdwdsb323b2d9" } });
    await new Promise((r) => setTimeout(r, 500));
    expect(contextFor("deploy:yes")).toHaveLength(1);
  });

  it("answers a button pressed twice in quick succession once: the second press is closed with a notice and recorded rejected (repeated_press), naming the first's run; another button, or another person, still runs", async () => {
    const keyboard = { inline_keyboard: [[{ text: "Approve", callback_data: "approve" }, { text: "Reject", callback_data: "reject" }]] };
    const message = { message_id: 4400, date: Math.floor(Date.now() / 1000), chat: { id: -101910, type: "supergroup", title: "Ops" }, from: { id: 123456, is_bot: true, first_name: "Test", username: OUR_USERNAME }, text: "Approve?", reply_markup: keyboard };
    const ada = { id: 42, is_bot: false, first_name: "Ada" };
    const pressOf = (id: string, data: string, from = ada) => ({ update_id: ++state.updateId, callback_query: { id, from, message, chat_instance: "-8", data } });
    const [first, second] = [pressOf("cb-tap-1", "approve"), pressOf("cb-tap-2", "approve")];
    const pressedAt = Date.now();
    // Both taps race in, as Telegram delivers them over separate connections.
    const [firstAck, secondAck] = await Promise.all([post(first), post(second)]);
    const acks = [firstAck.body, secondAck.body];
    const repeat = "Already answering your earlier press of this button.";
    expect(acks.filter((a) => a.text === repeat)).toHaveLength(1);
    expect(acks.filter((a) => a.text === undefined)).toHaveLength(1);
    await waitFor(() => sendsTo("-101910").length > 0, 10_000, "the press's answer");
    const rows = await host.query<{ event_id: string; run_id: string | null; disposition: string; metadata_json: string }>("SELECT event_id, run_id, disposition, metadata_json FROM event_log WHERE event_id IN (?, ?) ORDER BY seq", [`telegram:${botId}:${first.update_id}`, `telegram:${botId}:${second.update_id}`]);
    const answeredRow = rows.find((r) => r.run_id !== null)!;
    const repeatedRow = rows.find((r) => r.run_id === null)!;
    expect(JSON.parse(repeatedRow.metadata_json).rejection).toEqual({ reason: "repeated_press", first_event_id: answeredRow.event_id, first_run_id: answeredRow.run_id });
    // The other button on the same message, and another person's press of the same one, are questions of their own.
    expect((await post(pressOf("cb-tap-3", "reject"))).body).toEqual({ method: "answerCallbackQuery", callback_query_id: "cb-tap-3" });
    expect((await post(pressOf("cb-tap-4", "approve", { id: 43, is_bot: false, first_name: "Bob" }))).body).toEqual({ method: "answerCallbackQuery", callback_query_id: "cb-tap-4" });
    await waitFor(() => sendsTo("-101910").length === 3, 10_000, "the other presses' answers");
    await new Promise((r) => setTimeout(r, 300));
    expect(sendsTo("-101910").map((s) => s.body.text).sort()).toEqual(["echo: approve", "echo: approve", "echo: reject"]);
    expect(contextFor("approve").map((c) => c.actor.actor_id).sort()).toEqual(["42", "43"]);
    // Pressed again once its answer came (within the window still): asked anew, and answered.
    expect(Date.now() - pressedAt).toBeLessThan(PRESS_REPEAT_WINDOW_MS);
    expect((await post(pressOf("cb-tap-5", "approve"))).body).toEqual({ method: "answerCallbackQuery", callback_query_id: "cb-tap-5" });
    await waitFor(() => sendsTo("-101910").length === 4, 10_000, "the press's answer again");
    expect(contextFor("approve").map((c) => c.actor.actor_id).sort()).toEqual(["42", "42", "43"]);
  });

  it("runs a press on a message Telegram no longer gives (an InaccessibleMessage, date 0: no topic named) in the chat itself, its answer quoting nothing", async () => {
    // A button on an old message in a forum's topic: Telegram gives its chat and id only. A reply to it would go to
    // its topic, while the press, naming none, is recorded in the chat's General.
    const message = { message_id: 4322, date: 0, chat: { id: -101901, type: "supergroup", title: "Ops", is_forum: true } };
    const press = { update_id: ++state.updateId, callback_query: { id: "cb-inaccessible", from: { id: 42, is_bot: false, first_name: "Ada" }, message, chat_instance: "-8", data: "deploy:later" } };
    expect(await post(press)).toEqual({ status: 200, body: { method: "answerCallbackQuery", callback_query_id: "cb-inaccessible" } });
    const [send] = await waitFor(() => sendsTo("-101901").length > 0 && sendsTo("-101901"), 10_000, "the press's answer");
    expect(send.body.text).toBe("echo: deploy:later");
    expect(send.body.reply_parameters).toBeUndefined();
    expect(send.body.message_thread_id).toBeUndefined();
    const [ctx] = contextFor("deploy:later");
    expect(ctx.conversation).toMatchObject({ conversation_id: "-101901", thread_id: null });
    expect(ctx.event.data).toMatchObject({ callback_message_id: 4322, component: { custom_id: "deploy:later", label: null } });
    expect(ctx.delivery.reply_target).toMatchObject({ chat_id: "-101901", message_thread_id: null, reply_to_message_id: null });
  });

  it("shows on the bot's view why a message went unanswered with no agent: the agent disabled, or none scoped to the bot", async () => {
    const other = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN, name: "tg-off" }, { runner, agentId: "tg-off" });
    const agent = (await host.admin("GET", "/v1/admin/agents/tg-off")).body;
    expect((await host.admin("PUT", "/v1/admin/agents/tg-off", { ...agent, enabled: false })).status).toBe(200);
    const say = async (text: string) => {
      const u = update("-101050", { text });
      const res = await fetch(other.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(u) });
      expect(res.status).toBe(200);
      return (await host.admin("GET", `/v1/admin/bots/${other.botId}`)).body.last_unbound_event;
    };
    expect(await say("anyone there?")).toMatchObject({ event_type: "message.received", conversation_id: "-101050", reason: `agent tg-off (scope {"type":"bot","id":"${other.botId}"}) is disabled` });
    expect((await host.admin("DELETE", "/v1/admin/agents/tg-off")).status).toBe(200);
    expect(await say("still nobody?")).toMatchObject({ reason: "no agent's scope covers it (its bot, its workspace, its conversation, or global)" });
    // A press no agent takes is closed saying so, rather than left spinning.
    const press = { update_id: ++state.updateId, callback_query: { id: "cb-unbound", from: { id: 42, first_name: "Ada" }, chat_instance: "-9", data: "go", message: { message_id: 5, date: 1_700_000_000, chat: { id: -101050, type: "supergroup" } } } };
    const pressed = await fetch(other.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(press) });
    expect(await pressed.json()).toEqual({ method: "answerCallbackQuery", callback_query_id: "cb-unbound", text: "No agent answers here." });
    expect(contextFor("anyone there?")).toEqual([]);
  });

  it("shows on the bot's view the last reply the platform refused for good, in its words, with the run and chat", async () => {
    await post(update(BLOCKED_CHAT, { text: "are you there?" }));
    const runId = await waitFor(() => contextFor("are you there?")[0]?.run_id);
    const failure = await waitFor(async () => {
      const view = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body;
      return view.last_delivery_failure?.run_id === runId && view.last_delivery_failure;
    });
    expect(failure).toMatchObject({
      at: expect.any(String),
      run_id: runId,
      conversation_id: BLOCKED_CHAT,
      thread_id: null,
      operation: "send",
      status: 403,
      code: "telegram_403",
      error: "Forbidden: bot was blocked by the user",
    });
  });

  it("stops a reply at the first refusal of a group that removed the bot: its other parts and its files are not tried, and it is recorded once", async () => {
    // Three parts, then a text and a file.
    await post(update(KICKED_CHAT, { text: "long 9001" }));
    await post(update(KICKED_CHAT, { text: "attach kicked.pdf" }));
    const runIds = await waitFor(() => {
      const ids = ["long 9001", "attach kicked.pdf"].map((text) => contextFor(text)[0]?.run_id);
      return ids.every(Boolean) && ids;
    });
    // Settled: nothing more is tried after each reply's one refusal.
    const failures = await settledRefusals(host, runIds);
    const calls = fake.calls.filter((c) => String(c.body?.chat_id ?? /name="chat_id"\r\n\r\n([^\r]*)/.exec(c.raw)?.[1]) === KICKED_CHAT);
    expect(calls.map((c) => [c.path.split("/").pop(), c.body?.text])).toEqual([
      ["sendMessage", expect.stringMatching(/^line 1 /)],
      ["sendMessage", "here is kicked.pdf"],
    ]);
    for (const given of failures) expect(given).toEqual([expect.objectContaining({ operation: "send", part: 1, status: 403, code: "telegram_403", error: "Forbidden: bot was kicked from the supergroup chat", will_retry: false })]);
  });

  it("delivers a welcome for a join to the chat and topic, quoting nothing", async () => {
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "tg-welcome", scope: { type: "bot", id: botId }, eventTypes: ["group.member_joined"] });
    const joined = update("-101400", { new_chat_members: [{ id: 9, is_bot: false, first_name: "Dee" }], message_thread_id: 77, is_topic_message: true });
    expect((await post(joined)).status).toBe(200);
    const [send] = await waitFor(() => sendsTo("-101400").length > 0 && sendsTo("-101400"), 10_000, "the welcome");
    expect(send.body).toMatchObject({ chat_id: "-101400", message_thread_id: 77 });
    expect(send.body.reply_parameters).toBeUndefined();
  });

  it("records another bot's message without answering it (two agents would answer each other forever), but answers an anonymous admin", async () => {
    const fromBot = update("-101300", { from: { id: 999, is_bot: true, first_name: "OtherAgent" }, text: "a bot speaking", reply_to_message: { message_id: 5 } });
    expect((await post(fromBot)).status).toBe(200);
    const anonymousAdmin = update("-101300", { from: { id: 1087968824, is_bot: true, first_name: "Group", username: "GroupAnonymousBot" }, sender_chat: { id: -101300, type: "supergroup" }, text: "an admin speaking" });
    expect((await post(anonymousAdmin)).status).toBe(200);
    await waitFor(() => sendsTo("-101300").some((c) => c.body.text === "echo: an admin speaking"), 10_000, "the admin's answer");
    const [row] = await host.query<{ event_type: string; source_event_type: string }>("SELECT event_type, source_event_type FROM event_log WHERE event_id = ?", [`telegram:${botId}:${fromBot.update_id}`]);
    expect(row).toEqual({ event_type: "platform.unhandled", source_event_type: "message.from_bot" });
    expect(contextFor("a bot speaking")).toEqual([]);
  });

  it("records a linked channel's post auto-forwarded into its discussion group without answering it, but answers a comment on it", async () => {
    const forward = update("-101600", { from: { id: 777000, is_bot: false, first_name: "Telegram" }, sender_chat: { id: -1001016000001, type: "channel", title: "News" }, is_automatic_forward: true, text: "a channel post" });
    expect((await post(forward)).status).toBe(200);
    const [row] = await host.query<{ event_type: string; source_event_type: string; conversation_id: string }>("SELECT event_type, source_event_type, conversation_id FROM event_log WHERE event_id = ?", [`telegram:${botId}:${forward.update_id}`]);
    expect(row).toEqual({ event_type: "platform.unhandled", source_event_type: "message.automatic_forward", conversation_id: "-101600" });
    await post(update("-101600", { text: "a comment", reply_to_message: { message_id: forward.message.message_id } }));
    await waitFor(() => sendsTo("-101600").some((c) => c.body.text === "echo: a comment"), 10_000, "the comment's answer");
    expect(contextFor("a channel post")).toEqual([]);
    expect(sendsTo("-101600")).toHaveLength(1);
  });

  it("answers a group command addressed to it (any case, its name left out) or to no bot, and records one addressed to another bot without running it", async () => {
    const command = (text: string) => update("-101700", { text, entities: [{ type: "bot_command", offset: 0, length: text.split(" ")[0].length }] });
    const forOther = command("/help@OtherBot");
    expect((await post(forOther)).status).toBe(200);
    const [row] = await host.query<{ event_type: string; source_event_type: string; conversation_id: string }>("SELECT event_type, source_event_type, conversation_id FROM event_log WHERE event_id = ?", [`telegram:${botId}:${forOther.update_id}`]);
    expect(row).toEqual({ event_type: "platform.unhandled", source_event_type: "message.command_for_other_bot", conversation_id: "-101700" });
    const ours = command("/help@ourtestbot please");
    await post(ours);
    await post(command("/help"));
    // In a private chat only this bot is there to ask: a command naming another bot is answered as sent, one naming it
    // (as typed by hand) reaches the runner as a bare one reads.
    const inPrivate = (text: string) => ({ ...command(text), message: { ...command(text).message, chat: { id: 101700, type: "private" } } });
    await post(inPrivate("/start@OtherBot"));
    await waitFor(() => sendsTo("101700").length >= 1, 15_000, "the private answer");
    await post(inPrivate("/start@OurTestBot now"));
    await waitFor(() => sendsTo("-101700").length >= 2 && sendsTo("101700").length >= 2, 15_000, "the answers");
    expect(sendsTo("101700").map((c) => c.body.text)).toEqual(["echo: /start@OtherBot", "echo: /start now"]);
    // The runner gets the command as a bare one reads; the raw update keeps what was sent.
    expect(sendsTo("-101700").map((c) => c.body.text)).toEqual(["echo: /help please", "echo: /help"]);
    const [{ raw_ref: rawRef }] = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE event_id = ?", [`telegram:${botId}:${ours.update_id}`]);
    expect(JSON.parse(new TextDecoder().decode((await host.r2Object(rawRef))!)).message.text).toBe("/help@ourtestbot please");
    // A link after the command keeps its target where it is, its offset counted in the text as sent.
    const text = "/ask@OurTestBot see the docs";
    await post(update("-101700", { text, entities: [{ type: "bot_command", offset: 0, length: 15 }, { type: "text_link", offset: 24, length: 4, url: "https://example.com/docs" }] }));
    await waitFor(() => sendsTo("-101700").length >= 3, 15_000, "the linked command's answer");
    expect(sendsTo("-101700")[2].body.text).toBe("echo: /ask see the docs (https://example.com/docs)");
    expect(contextFor("/help@OtherBot").filter((c) => c.conversation.conversation_id === "-101700")).toEqual([]);
    // The username was asked once, when a command first named a bot, and kept.
    expect(fake.callsTo(/\/getMe$/).filter((c) => c.path.includes(BOT_TOKEN))).toHaveLength(1);
  });
});

describe("Telegram: answers' Markdown rendered", () => {
  const ANSWER = [
    "# Plan for `parse_config`",
    "Use **bold _and italic_**, ~~old~~ and `a < b && c`; see [the docs](https://example.com/wiki/Foo_(bar)) or https://example.com/snake_case/__init__.py.",
    "- keep snake_case_names & <tags>",
    "> a *quote*",
    "```python",
    'print(a < b and "&")',
    "```",
  ].join("\n");
  const RENDERED = [
    "<b>Plan for <code>parse_config</code></b>",
    'Use <b>bold <i>and italic</i></b>, <s>old</s> and <code>a &lt; b &amp;&amp; c</code>; see <a href="https://example.com/wiki/Foo_(bar)">the docs</a> or https://example.com/snake_case/__init__.py.',
    "• keep snake_case_names &amp; &lt;tags&gt;",
    "<blockquote>a <i>quote</i></blockquote>",
    '<pre><code class="language-python">print(a &lt; b and "&amp;")</code></pre>',
  ].join("\n");
  const sentTo = (chat: string) => fake.callsTo(/\/(sendMessage|editMessageText)$/).filter((c) => String(c.body.chat_id) === chat);

  it("sends an answer's Markdown as Telegram HTML; the ledger, the Transcript and the trail keep the Markdown as the runner sent it", async () => {
    await post(update("-103000", { text: `samefinal ${ANSWER}` }));
    const [send] = await waitFor(() => sendsTo("-103000").length > 0 && sendsTo("-103000"), 15_000, "the answer");
    expect(send.body).toMatchObject({ parse_mode: "HTML", text: RENDERED });
    const runId = contextFor(`samefinal ${ANSWER}`)[0].run_id;
    await host.waitForRun(runId);
    expect(await recordedAnswer(host, runId)).toEqual({ ledger: ANSWER, transcript: ANSWER });
    const sent = await waitFor(async () => (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId]))[0]);
    expect(JSON.parse(sent.data_json)).toMatchObject({ operation: "send", attempt: 1, chars: ANSWER.length });
  });

  it("streams Markdown with every edit well-formed HTML: an unpaired marker is text, a code block still open is closed", async () => {
    const words = "**Step one** uses `x < y` & then:\n```js\nconst a = 1;\nconst b = a && 2;\nlet c = [a, b];\nreturn c;\n```\n~~done~~ *ok*";
    await post(update("-103100", { text: `stream ${words}` }));
    const final = '<b>Step one</b> uses <code>x &lt; y</code> &amp; then:\n<pre><code class="language-js">const a = 1;\nconst b = a &amp;&amp; 2;\nlet c = [a, b];\nreturn c;</code></pre>\n<s>done</s> <i>ok</i>';
    await waitFor(() => editsOf("-103100").some((c) => c.body.text === final), 20_000, "the final edit");
    const bodies = sentTo("-103100").map((c) => c.body);
    expect(bodies.length).toBeGreaterThan(2);
    for (const body of bodies) {
      expect(body.parse_mode).toBe("HTML");
      expect(telegramHtmlProblem(body.text), body.text).toBeNull();
    }
    // A draft shown mid-block: the block open in the Markdown, closed in the HTML.
    expect(bodies.some((b) => b.text.includes('<pre><code class="language-js">') && !b.text.includes("done"))).toBe(true);
    expect(sendsTo("-103100")).toHaveLength(1);
  });

  it("sends the same text again as plain text when Telegram cannot parse its HTML, a send and each edit, and the trail says so", async () => {
    await post(update(REFUSING_HTML, { text: "stream **one** two three four five" }));
    const source = "**one** two three four five";
    await waitFor(() => editsOf(REFUSING_HTML).some((c) => c.body.text === source && c.body.parse_mode === undefined), 20_000, "the final text, plain");
    const [refused, plain] = sendsTo(REFUSING_HTML);
    expect(refused.body).toMatchObject({ parse_mode: "HTML", text: "<b>one</b>" });
    expect(plain.body.parse_mode).toBeUndefined();
    expect(plain.body.text).toBe("**one**");
    expect(sendsTo(REFUSING_HTML)).toHaveLength(2);
    // Every formatted edit refused was made again, at once, as the same text plain.
    const edits = editsOf(REFUSING_HTML);
    for (const [i, edit] of edits.entries()) if (edit.body.parse_mode === "HTML") expect(edits[i + 1].body).toMatchObject({ message_id: edit.body.message_id, text: expect.any(String) });
    expect(edits.filter((e) => e.body.parse_mode === undefined).length).toBe(edits.filter((e) => e.body.parse_mode === "HTML").length);
    const runId = contextFor("stream **one** two three four five").find((c) => c.conversation.conversation_id === REFUSING_HTML)!.run_id;
    await host.waitForRun(runId);
    const trail = await waitFor(async () => {
      const rows = (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
      return rows.some((r) => r.type === "delivery.succeeded" && r.operation === "edit") && rows;
    });
    expect(trail.filter((r) => r.operation === "send").map(({ type, attempt, status, will_retry, retry_in_ms, format }) => ({ type, attempt, status, will_retry, retry_in_ms, format }))).toEqual([
      { type: "delivery.attempted", attempt: 1, status: undefined, will_retry: undefined, retry_in_ms: undefined, format: undefined },
      { type: "delivery.failed", attempt: 1, status: 400, will_retry: true, retry_in_ms: 0, format: undefined },
      { type: "delivery.attempted", attempt: 2, status: undefined, will_retry: undefined, retry_in_ms: undefined, format: "plain" },
      { type: "delivery.succeeded", attempt: 2, status: undefined, will_retry: undefined, retry_in_ms: undefined, format: "plain" },
    ]);
    expect(trail.find((r) => r.type === "delivery.failed")!.error).toMatch(/^Bad Request: can't parse entities/);
  });

  it("shows a table as an aligned monospaced block and lists with their numbers and nesting; a table longer than a message goes on in the next under its header again", async () => {
    await post(update("-103400", { text: `samefinal ${TABLE_ANSWER}` }));
    const [send] = await waitFor(() => sendsTo("-103400").length > 0 && sendsTo("-103400"), 15_000, "the answer");
    expect(send.body).toMatchObject({
      parse_mode: "HTML",
      text: TABLE_ANSWER_TELEGRAM,
    });
    const rows = Array.from({ length: 300 }, (_, i) => `| item ${i} | ${i * 7} |`).join("\n");
    await post(update("-103401", { text: `samefinal Stock:\n| Item | Count |\n|---|--:|\n${rows}\nThat is all.` }));
    const parts = await waitFor(() => sendsTo("-103401").length >= 2 && sendsTo("-103401").map((c) => String(c.body.text)), 15_000, "the answer's parts");
    expect(parts).toHaveLength(2);
    expect(parts[0].startsWith("Stock:\n<pre>Item     │ Count\n─────────┼──────\nitem 0   │     0\n")).toBe(true);
    expect(parts[1].startsWith("<pre>Item     │ Count\n─────────┼──────\nitem ")).toBe(true);
    expect(parts[1].endsWith("item 299 │  2093</pre>\nThat is all.")).toBe(true);
    for (const part of parts) {
      expect(telegramHtmlProblem(part)).toBeNull();
      expect(part.replace(/<[^>]*>/g, "").length).toBeLessThanOrEqual(4096);
    }
  });

  it("streams a table with every edit well-formed HTML and no line of pipes: a header waits for its delimiter row, from which on it is a table", async () => {
    const words = "Totals:\n| Item | Qty |\n|---|--:|\n| pens | 3 |\n| paper | 120 |\ndone";
    await post(update("-103500", { text: `stream ${words}` }));
    const final = "Totals:\n<pre>Item  │ Qty\n──────┼────\npens  │   3\npaper │ 120</pre>\ndone";
    await waitFor(() => editsOf("-103500").some((c) => c.body.text === final), 20_000, "the final edit");
    const bodies = sentTo("-103500").map((c) => c.body);
    expect(bodies.length).toBeGreaterThan(2);
    for (const body of bodies) {
      expect(body.parse_mode).toBe("HTML");
      expect(telegramHtmlProblem(body.text), body.text).toBeNull();
      expect(body.text).not.toContain("|");
    }
    expect(bodies.some((b) => b.text.includes("<pre>Item") && !b.text.includes("done"))).toBe(true);
  });

  it("sends the answer as it is for an agent whose delivery_policy.format is plain", async () => {
    const agent = { agent_id: "tg-plain", name: "plain", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "-103300", bot_id: botId }, delivery_policy: { format: "plain" } };
    const created = await host.admin("POST", "/v1/admin/agents", agent);
    expect(created.status).toBe(201);
    expect(created.body.delivery_policy).toMatchObject({ format: "plain", streaming: true });
    expect((await host.admin("POST", "/v1/admin/agents", { ...agent, agent_id: "tg-loud", delivery_policy: { format: "html" } })).status).toBe(400);
    await post(update("-103300", { text: `samefinal ${ANSWER}` }));
    const [send] = await waitFor(() => sendsTo("-103300").length > 0 && sendsTo("-103300"), 15_000, "the answer");
    expect(send.body.parse_mode).toBeUndefined();
    expect(send.body.text).toBe(ANSWER);
  });
});

describe("Telegram: what this file sent and was answered", () => {
  it("keeps the bot's credentials out of every answer, record, stored payload and log line", () => platform.keepsSecretsOut());
});
