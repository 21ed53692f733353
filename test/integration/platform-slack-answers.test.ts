import { beforeAll, describe, expect, it } from "vitest";
import { recordedAnswer } from "../support/host";
import { ANSWER_FILE, waitFor } from "../support/fake-platform";
import { slackMrkdwnProblem } from "../support/slack-mrkdwn";
import { TABLE_ANSWER, TABLE_ANSWER_SLACK } from "../support/markdown-sample";
import { useSlackPlatform, type SlackPlatform } from "../support/slack-platform";

/** Slack answers as mrkdwn and files, button presses and other interactivity. */
const platform = useSlackPlatform();
const { state, BOT_USER, cutAsk, cutBytes, threadParents, answered, sign, post, callback, message, postsTo, updatesIn, contextFor, fileRecords } = platform;
let host: SlackPlatform["host"];
let fake: SlackPlatform["fake"];
let runner: SlackPlatform["runner"];
let botId: string;
let webhookUrl: string;
beforeAll(() => void ({ host, fake, runner, botId, webhookUrl } = platform));

describe("Slack: answers' Markdown as mrkdwn", () => {
  const ANSWER = [
    "# Plan for `parse_config`",
    "Use **bold _and italic_**, ~~old~~ and `a < b && c`; see [the docs](https://example.com/wiki/Foo_(bar)), not <!channel>.",
    "- keep snake_case_names & <tags>",
    "```python",
    'print(a < b and "&")',
    "```",
  ].join("\n");
  const RENDERED = [
    "*Plan for `parse_config`*",
    "Use *bold _and italic_*, ~old~ and `a &lt; b &amp;&amp; c`; see <https://example.com/wiki/Foo_(bar)|the docs>, not &lt;!channel&gt;.",
    "• keep snake_case_names &amp; &lt;tags&gt;",
    "```",
    'print(a &lt; b and "&amp;")',
    "```",
  ].join("\n");
  /** A message's text as Slack delivers it: `& < >` escaped. */
  const typed = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const bodiesIn = (channel: string) => fake.callsTo(/^\/chat\.(postMessage|update)$/).filter((c) => c.body.channel === channel).map((c) => c.body);

  it("posts an answer's Markdown as mrkdwn, a link's < > the only ones raw, or as it is for a plain agent; the ledger and the Transcript keep the Markdown", async () => {
    await post(callback(message("C-MD", typed(`samefinal ${ANSWER}`))));
    const [reply] = await waitFor(() => postsTo("C-MD").length > 0 && postsTo("C-MD"), 15_000, "the answer");
    expect(reply.body.text).toBe(RENDERED);
    expect(slackMrkdwnProblem(reply.body.text)).toBeNull();
    const runId = contextFor(`samefinal ${ANSWER}`)[0].run_id;
    await host.waitForRun(runId);
    expect(await recordedAnswer(host, runId)).toEqual({ ledger: ANSWER, transcript: ANSWER });

    // An agent whose delivery_policy.format is plain: the answer as it is, only escaped.
    const agent = { agent_id: "slack-plain", name: "plain", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "C-PLAIN", bot_id: botId }, delivery_policy: { format: "plain" } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    await post(callback(message("C-PLAIN", typed(`samefinal ${ANSWER}`))));
    const [plain] = await waitFor(() => postsTo("C-PLAIN").length > 0 && postsTo("C-PLAIN"), 15_000, "the plain answer");
    expect(plain.body.text).toBe(typed(ANSWER));
  });

  it("streams with every post and chat.update well-formed mrkdwn: an unpaired marker is text, a code block still open is closed", async () => {
    const words = "**Step one** uses `x < y` & then:\n```js\nconst a = 1;\nconst b = a && 2;\nlet c = [a, b];\nreturn c;\n```\n~~done~~ *ok*";
    await post(callback(message("C-MD-STREAM", typed(`stream ${words}`))));
    const final = "*Step one* uses `x &lt; y` &amp; then:\n```\nconst a = 1;\nconst b = a &amp;&amp; 2;\nlet c = [a, b];\nreturn c;\n```\n~done~ _ok_";
    await waitFor(() => updatesIn("C-MD-STREAM").some((c) => c.body.text === final), 20_000, "the final update");
    const bodies = bodiesIn("C-MD-STREAM");
    expect(bodies.length).toBeGreaterThan(2);
    for (const body of bodies) expect(slackMrkdwnProblem(body.text), body.text).toBeNull();
    // A draft shown mid-block: the block open in the Markdown, closed in the mrkdwn.
    expect(bodies.some((b) => b.text.includes("```\nconst a = 1;") && !b.text.includes("done"))).toBe(true);
    expect(postsTo("C-MD-STREAM")).toHaveLength(1);
  });

  it("posts a table as an aligned code block (Slack has none) and nested bullets by depth; streamed, no update shows a line of pipes", async () => {
    await post(callback(message("C-MD-TABLE", typed(`samefinal ${TABLE_ANSWER}`))));
    const [reply] = await waitFor(() => postsTo("C-MD-TABLE").length > 0 && postsTo("C-MD-TABLE"), 15_000, "the answer");
    expect(reply.body.text).toBe(TABLE_ANSWER_SLACK);
    const words = "Totals:\n| Item | Qty |\n|---|--:|\n| pens | 3 |\n| paper | 120 |\ndone";
    await post(callback(message("C-MD-TABLE-STREAM", typed(`stream ${words}`))));
    const final = "Totals:\n```\nItem  │ Qty\n──────┼────\npens  │   3\npaper │ 120\n```\ndone";
    await waitFor(() => updatesIn("C-MD-TABLE-STREAM").some((c) => c.body.text === final), 20_000, "the final update");
    const bodies = bodiesIn("C-MD-TABLE-STREAM");
    expect(bodies.length).toBeGreaterThan(2);
    for (const body of bodies) {
      expect(slackMrkdwnProblem(body.text), body.text).toBeNull();
      expect(body.text).not.toContain("|");
    }
  });

  it("leaves room for closing a code block the answer leaves open, posted or streamed: no message outgrows the 4000", async () => {
    // 3,998 as the split measures it (escaped), 4,002 with the closing fence the mrkdwn adds.
    const open = `\`\`\`\n${["<>".repeat(166), "<>".repeat(166), `${"<>".repeat(166)}aaaaaaaa`].join(" ")}`;
    await post(callback(message("C-MD-OPEN", typed(`samefinal ${open}`))));
    await post(callback(message("C-MD-OPEN-STREAM", typed(`stream ${open}`))));
    // What each message shows in the end: its last update, else what was posted.
    const shown = (channel: string) => postsTo(channel).map((p) => updatesIn(channel).filter((u) => u.body.ts === (p.reply!.json as any).ts).at(-1)?.body.text ?? p.body.text);
    for (const channel of ["C-MD-OPEN", "C-MD-OPEN-STREAM"]) {
      await waitFor(() => shown(channel).at(-1)?.endsWith("aaaaaaaa\n```"), 15_000, "the answer's end");
      const bodies = bodiesIn(channel);
      expect(bodies.map((b) => b.text.length).filter((n) => n > 4000)).toEqual([]);
      for (const body of bodies) expect(slackMrkdwnProblem(body.text), body.text).toBeNull();
    }
    expect(updatesIn("C-MD-OPEN-STREAM").length).toBeGreaterThan(0);
  });
});

describe("Slack: files in answers", () => {
  it("uploads an answer's file in Slack's three steps and shares it in the thread, after the text", async () => {
    const threadTs = `${++state.messageTs}.000100`;
    await post(callback(message("C-FILES", "attach chart.png", { thread_ts: threadTs })));
    // This channel's: an earlier test's answer shared a chart.png too.
    const shared = await waitFor(() => fake.callsTo(/^\/files\.completeUploadExternal$/).find((c) => new URLSearchParams(c.raw).get("channel_id") === "C-FILES"), 15_000, "the shared file");
    const id = JSON.parse(new URLSearchParams(shared.raw).get("files")!)[0].id;
    const asked = fake.callsTo(/^\/files\.getUploadURLExternal$/).find((c) => (c.reply?.json as { file_id?: string } | undefined)?.file_id === id)!;
    expect(Object.fromEntries(new URLSearchParams(asked.raw))).toEqual({ filename: "chart.png", length: String(ANSWER_FILE.length) });
    const [uploaded] = fake.callsTo(new RegExp(`^/upload/${id}$`));
    expect(uploaded.bytes.equals(ANSWER_FILE)).toBe(true);
    expect(uploaded.headers.authorization).toBeUndefined();
    // Streamed from storage with its length declared, not chunked.
    expect(uploaded.headers["content-length"]).toBe(String(ANSWER_FILE.length));
    expect(uploaded.headers["content-type"]).toBe("image/png");
    const fileId = uploaded.path.split("/").pop();
    const completed = Object.fromEntries(new URLSearchParams(shared.raw));
    expect(completed).toMatchObject({ channel_id: "C-FILES", thread_ts: threadTs });
    expect(JSON.parse(completed.files)).toEqual([{ id: fileId, title: "chart.png" }]);
    // The text went first, in the same thread.
    expect(postsTo("C-FILES")[0].body).toMatchObject({ text: "here is chart.png", thread_ts: threadTs });
    expect(postsTo("C-FILES")[0].at).toBeLessThanOrEqual(asked.at);
  });

  it("follows an upload URL's 307 redirect with the file's bytes, as a retried or redirected call streams the file again", async () => {
    await post(callback(message("C-MOVED", "attach moved.png")));
    const shared = await waitFor(
      () => fake.callsTo(/^\/files\.completeUploadExternal$/).find((c) => new URLSearchParams(c.raw).get("channel_id") === "C-MOVED"),
      15_000,
      "the shared file",
    );
    const [asked] = fake.callsTo(/^\/files\.getUploadURLExternal$/).filter((c) => new URLSearchParams(c.raw).get("filename") === "moved.png");
    const id = JSON.parse(new URLSearchParams(shared.raw).get("files")!)[0].id;
    expect(asked.reply?.json).toMatchObject({ file_id: id });
    const [uploaded] = fake.callsTo(new RegExp(`^/upload/${id}$`));
    expect(uploaded.bytes.equals(ANSWER_FILE)).toBe(true);
  });
  it("repeats an upload step that got no answer (nothing is in the channel before the share), and shares the file once", async () => {
    cutAsk.add("cut-ask.pdf");
    cutBytes.add("cut-bytes.pdf");
    for (const name of ["cut-ask.pdf", "cut-bytes.pdf"]) await post(callback(message(`C-CUT-${name}`, `attach ${name}`)));
    for (const name of ["cut-ask.pdf", "cut-bytes.pdf"]) {
      const runId = (await waitFor(() => contextFor(`attach ${name}`)[0], 10_000, "the run")).run_id;
      const outcomes = await waitFor(async () => {
        const files = (await fileRecords(runId)).filter((r) => r.type !== "delivery.attempted");
        return files.some((r) => r.type === "delivery.succeeded" || r.will_retry === false) && files;
      }, 15_000, `${name}'s delivery`);
      expect(outcomes.map((r) => [r.type, r.code ?? null, r.will_retry ?? null])).toEqual([
        ["delivery.failed", "network_error", true],
        ["delivery.succeeded", null, null],
      ]);
      const shares = fake.callsTo(/^\/files\.completeUploadExternal$/).filter((c) => new URLSearchParams(c.raw).get("channel_id") === `C-CUT-${name}`);
      expect(shares).toHaveLength(1);
      // A retry starts again from the first step: a fresh upload URL, the bytes streamed again.
      const asked = fake.callsTo(/^\/files\.getUploadURLExternal$/).filter((c) => new URLSearchParams(c.raw).get("filename") === name);
      expect(asked).toHaveLength(2);
    }
  });
});

describe("Slack: button presses and other interactivity", () => {
  /** A response_url as Slack sends it: it posts in the chat for 30 minutes without a token, so it is a credential. */
  const RESPONSE_URL = "https://hooks.slack.com/actions/T1/5550001/ResponseUrlSecret0123456789";
  let triggers = 0;

  /** Slack's interactivity request: form-encoded, the JSON in `payload`, signed over the raw form body as events are. */
  async function postForm(form: Record<string, string>, opts: { signature?: string; unsigned?: boolean } = {}) {
    const body = new URLSearchParams(form).toString();
    const timestamp = Math.floor(Date.now() / 1000);
    const signed: Record<string, string> = opts.unsigned ? {} : { "x-slack-request-timestamp": String(timestamp), "x-slack-signature": opts.signature ?? sign(timestamp, body) };
    const started = Date.now();
    const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...signed }, body });
    const text = await res.text();
    answered.push(text);
    return { status: res.status, text, tookMs: Date.now() - started };
  }
  const interact = (payload: Record<string, unknown>) => postForm({ payload: JSON.stringify(payload) });

  /** A block_actions payload as Slack sends it for a press on a message in `channel` (in `thread`, when given). */
  function press(channel: string, action: Record<string, unknown>, thread?: string) {
    const ts = `${++state.messageTs}.000300`;
    return {
      type: "block_actions",
      user: { id: "U42", username: "ada", name: "ada", team_id: "T1" },
      api_app_id: "A1",
      token: "legacy-verification-token",
      container: { type: "message", message_ts: ts, channel_id: channel, is_ephemeral: false, ...(thread ? { thread_ts: thread } : {}) },
      trigger_id: `${++triggers}.1234.abcdef`,
      team: { id: "T1", domain: "acme" },
      enterprise: null,
      is_enterprise_install: false,
      channel: { id: channel, name: "general" },
      message: { user: BOT_USER, type: "message", ts, bot_id: "B0BOT", app_id: "A1", text: "Approve?", ...(thread ? { thread_ts: thread } : {}) },
      state: { values: {} },
      response_url: RESPONSE_URL,
      actions: [{ block_id: "b1", action_ts: `${ts}1`, ...action }],
    };
  }
  const rows = (channel: string) =>
    host.query<{ event_type: string; source_event_type: string; data_json: string }>("SELECT event_type, source_event_type, data_json FROM event_log WHERE conversation_id = ? ORDER BY seq", [channel]);

  it("runs a signed button press as a message (a forged or unsigned one is refused): the runner gets its value and who pressed it, the reply goes to the message's thread, Slack gets an empty 200 at once", async () => {
    const thread = `${++state.messageTs}.000100`;
    const payload = press("C-PRESS", { type: "button", action_id: "approve_btn", text: { type: "plain_text", text: "Approve", emoji: true }, value: "approve", style: "primary" }, thread);
    // Signed with another secret, or not at all: refused before anything is read, so nothing is recorded or run.
    const form = { payload: JSON.stringify(payload) };
    const forged = await postForm(form, { signature: sign(Math.floor(Date.now() / 1000), new URLSearchParams(form).toString(), "another-secret-0123456789") });
    const unsigned = await postForm(form, { unsigned: true });
    expect([forged.status, unsigned.status]).toEqual([401, 401]);
    expect(await rows("C-PRESS")).toEqual([]);
    const res = await interact(payload);
    expect(res).toMatchObject({ status: 200, text: "" });
    expect(res.tookMs).toBeLessThan(3_000);
    const [reply] = await waitFor(() => postsTo("C-PRESS").length > 0 && postsTo("C-PRESS"), 15_000, "the answer to the press");
    expect(reply.body).toEqual({ channel: "C-PRESS", thread_ts: thread, text: "echo: approve" });
    const [ctx] = contextFor("approve");
    expect(ctx.event).toMatchObject({ event_type: "message.received", source: "slack", source_event_type: "block_actions", event_id: `slack:${botId}:interaction:${payload.trigger_id}` });
    expect(ctx.event.data).toEqual({ team_id: "T1", component: { custom_id: "approve_btn", component_type: "button", block_id: "b1", values: ["approve"] }, message_ts: payload.message.ts });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C-PRESS", thread_id: thread, sender_id: "U42" });
    expect(ctx.delivery).toMatchObject({ surface: "slack", reply_target: { channel: "C-PRESS", thread_ts: thread } });
    // The response_url and the legacy token are kept nowhere: not in the stored payload, the record, nor any answer.
    const raw = JSON.parse(new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!));
    expect(raw.response_url).toBeUndefined();
    expect(raw.token).toBeUndefined();
    expect(raw.actions[0].value).toBe("approve");
    const stored = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    for (const text of [...stored.map((r) => r.row), JSON.stringify(raw), ...answered]) expect(text).not.toContain("ResponseUrlSecret");
  });

  it("reads what a select, a user picker and a button without a value chose; a press on a top-level message is answered at top level", async () => {
    await interact(press("C-SELECT", { type: "static_select", action_id: "plan", selected_option: { text: { type: "plain_text", text: "Plan B" }, value: "plan-b" } }));
    await waitFor(() => postsTo("C-SELECT").length > 0, 15_000, "the select's answer");
    expect(postsTo("C-SELECT")[0].body).toEqual({ channel: "C-SELECT", text: "echo: plan-b" });
    expect(contextFor("plan-b")[0].event.data.component).toEqual({ custom_id: "plan", component_type: "static_select", block_id: "b1", values: ["plan-b"] });
    await interact(press("C-PICK", { type: "users_select", action_id: "assignee", selected_user: "U77" }));
    await waitFor(() => postsTo("C-PICK").length > 0, 15_000, "the picker's answer");
    expect(contextFor("@U77")[0].event.data.component.values).toEqual(["U77"]);
    await interact(press("C-LABEL", { type: "button", action_id: "more", text: { type: "plain_text", text: "Show more" } }));
    await waitFor(() => postsTo("C-LABEL").length > 0, 15_000, "the label's answer");
    expect(contextFor("Show more")[0].conversation).toMatchObject({ conversation_id: "C-LABEL", thread_id: null });
  });

  it("never takes a message shortcut's copy of a thread's parent for the parent itself: it is read from Slack, its own author named", async () => {
    const channel = "C-SC-PARENT";
    const parent = { type: "message", user: "U77", text: "the launch plan", ts: `${++state.messageTs}.000100` };
    threadParents.set(parent.ts, { ...parent, thread_ts: parent.ts });
    // Bo summarises Ann's message, which the bot (app_mention only) never received: recorded under its ts, as Bo's.
    await interact({ type: "message_action", team: { id: "T1" }, user: { id: "U7", username: "bo", team_id: "T1" }, channel: { id: channel }, callback_id: "summarize", trigger_id: `${++triggers}.42.sc`, message_ts: parent.ts, message: parent });
    await waitFor(() => contextFor("the launch plan").length > 0, 15_000, "the shortcut's run");
    await post(callback(message(channel, "<@UBOT> when does it start?", { thread_ts: parent.ts, parent_user_id: "U77" })));
    const [ctx] = await waitFor(() => contextFor("when does it start?").length > 0 && contextFor("when does it start?"), 15_000, "the thread reply's run");
    expect(ctx.event.data.reply_to).toEqual({ message_id: parent.ts, actor: { actor_type: "user", actor_id: "U77", actor_name: null }, text: "the launch plan", quote: null, attachments: [], unavailable: null });
    expect(fake.callsTo(/^\/conversations\.replies$/).filter((c) => new URLSearchParams(c.raw).get("ts") === parent.ts)).toHaveLength(1);
  });

  it("takes a parent the bot delivered and Slack deleted outright (message_deleted of its own post) as deleted, not from the record; a shortcut's copy of it is kept", async () => {
    const channel = "C-SC-OWN-DEL";
    await post(callback(message(channel, "<@UBOT> list the risks")));
    const [answer] = await waitFor(() => postsTo(channel).length > 0 && postsTo(channel));
    const own = { type: "message", user: BOT_USER, bot_id: "B0BOT", app_id: "A1", ts: (answer.reply!.json as { ts: string }).ts, text: "echo: list the risks" };
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE event_type = 'delivery.succeeded' AND message_ref = ?", [own.ts])).length > 0, 15_000, "the answer recorded");
    // Bo summarises the answer: recorded under its ts, its input a copy of it.
    const trigger = `${++triggers}.42.sc`;
    await interact({ type: "message_action", team: { id: "T1" }, user: { id: "U7", username: "bo", team_id: "T1" }, channel: { id: channel }, callback_id: "summarize", trigger_id: trigger, message_ts: own.ts, message: own });
    await waitFor(() => contextFor(own.text).length > 0, 15_000, "the shortcut's run");
    expect((await post(callback({ type: "message", subtype: "message_deleted", hidden: true, channel, ts: `${++state.messageTs}.000300`, deleted_ts: own.ts, previous_message: own }))).status).toBe(200);
    threadParents.set(own.ts, { type: "message", subtype: "tombstone", user: "USLACKBOT", hidden: true, text: "This message was deleted.", ts: own.ts, thread_ts: own.ts });
    await post(callback(message(channel, "still there?", { thread_ts: own.ts, parent_user_id: BOT_USER })));
    const [ctx] = await waitFor(() => contextFor("still there?").length > 0 && contextFor("still there?"), 15_000, "the thread reply's run");
    expect(ctx.event.data.reply_to).toMatchObject({ message_id: own.ts, text: null, attachments: [], unavailable: "it was deleted" });
    // The deletion withdrew no one's words: Bo's copy keeps its record and its item.
    const copyId = `slack:${botId}:interaction:${trigger}`;
    expect(await host.query("SELECT json_type(metadata_json, '$.recalled') AS recalled FROM event_log WHERE event_id = ?", [copyId])).toEqual([{ recalled: null }]);
    expect(await host.query("SELECT content FROM transcript WHERE event_id = ? AND role = 'user'", [copyId])).toEqual([{ content: own.text }]);
  });

  it("records a modal's submission, a global shortcut and a press in a modal with an empty 200, running none; an external select's options request is offered none", async () => {
    const before = runner.calls.length;
    const user = { id: "U42", username: "ada", team_id: "T1" };
    const view = { id: "V1", type: "modal", callback_id: "survey", hash: "h1", state: { values: { b: { a: { type: "plain_text_input", value: "typed" } } } } };
    const sent = [
      { type: "view_submission", user, view, trigger_id: "91.1", response_urls: [{ block_id: "b", action_id: "a", channel_id: "C-MODAL", response_url: RESPONSE_URL }] },
      { type: "shortcut", user, callback_id: "open_app", trigger_id: "92.1" },
      { type: "block_actions", user, container: { type: "view", view_id: "V1" }, view, trigger_id: "94.1", actions: [{ type: "button", action_id: "next", value: "2" }] },
    ];
    for (const payload of sent) expect(await interact(payload)).toMatchObject({ status: 200, text: "" });
    const recorded = await host.query<{ event_id: string; event_type: string; source_event_type: string; conversation_id: string | null; raw_ref: string }>(
      "SELECT event_id, event_type, source_event_type, conversation_id, raw_ref FROM event_log WHERE event_id IN (?, ?, ?) ORDER BY seq",
      ["91.1", "92.1", "94.1"].map((t) => `slack:${botId}:interaction:${t}`),
    );
    expect(recorded.map(({ event_type, source_event_type, conversation_id }) => ({ event_type, source_event_type, conversation_id }))).toEqual([
      { event_type: "platform.unhandled", source_event_type: "view_submission", conversation_id: null },
      { event_type: "platform.unhandled", source_event_type: "shortcut", conversation_id: null },
      { event_type: "platform.unhandled", source_event_type: "block_actions.view", conversation_id: null },
    ]);
    for (const { raw_ref } of recorded) {
      const raw = new TextDecoder().decode((await host.r2Object(raw_ref))!);
      expect(raw).not.toContain("ResponseUrlSecret");
      expect(raw).not.toContain("legacy-verification-token");
    }
    // An external select asks for its options as the user types: answered at once with none, and not recorded.
    const suggestion = await interact({ type: "block_suggestion", user, action_id: "search", block_id: "b", value: "ad", trigger_id: "96.1" });
    expect(suggestion).toMatchObject({ status: 200 });
    expect(JSON.parse(suggestion.text)).toEqual({ options: [] });
    expect(await host.query("SELECT 1 FROM event_log WHERE event_id = ?", [`slack:${botId}:interaction:96.1`])).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });
});

describe("Slack: what this file sent and was answered", () => {
  it("keeps the bot's credentials out of every answer, record, stored payload and log line", () => platform.keepsSecretsOut());
});
