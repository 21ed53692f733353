import { generateKeyPairSync } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { gapsBetween, waitFor } from "../support/fake-platform";
import { TABLE_ALIGNED, TABLE_ANSWER } from "../support/markdown-sample";
import { useDiscordPlatform, type DiscordPlatform } from "../support/discord-platform";

/** Discord interactions in and deferred responses out: commands and what they give the runner, interruptions, signatures, streaming, splitting, retries. */
const platform = useDiscordPlatform();
const { APPLICATION_ID, FILE, throttledTokens, gatewayTimeouts, postRaw, signed, post, interaction, command, writesFor, contextFor, runOf } = platform;
let host: DiscordPlatform["host"];
let fake: DiscordPlatform["fake"];
let runner: DiscordPlatform["runner"];
let botId: string;
let privateKey: DiscordPlatform["privateKey"];
beforeAll(() => void ({ host, fake, runner, botId, privateKey } = platform));

describe("Discord: interactions over HTTP, answered by editing the deferred response", () => {
  it("answers PING with PONG", async () => {
    expect(await post({ id: "1", application_id: APPLICATION_ID, type: 1, token: "t", version: 1 })).toEqual({ status: 200, body: { type: 1 } });
  });

  it("defers a slash command at once and delivers the answer by editing the original response", async () => {
    const i = command("hello discord");
    const started = Date.now();
    const res = await post(i);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(res).toEqual({ status: 200, body: { type: 5 } });
    const [edit] = await waitFor(() => writesFor(i).length > 0 && writesFor(i));
    expect(edit.method).toBe("PATCH");
    expect(edit.path).toBe(`/webhooks/${APPLICATION_ID}/${i.token}/messages/@original`);
    expect(edit.body).toEqual({ content: "echo: hello discord", allowed_mentions: { parse: [] } });
    const [ctx] = contextFor("hello discord");
    expect(ctx.event).toMatchObject({ event_id: `discord:${botId}:${i.id}`, source: "discord", source_event_type: "APPLICATION_COMMAND" });
    expect(ctx.event.data).toMatchObject({ guild_id: "G1", channel_id: "C1", command: { name: "ask", path: [], options: { question: "hello discord" } } });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C1", thread_id: null, sender_id: "U42" });
    expect(ctx.delivery).toMatchObject({ surface: "discord", reply_target: { channel_id: "C1", interaction_id: i.id }, supports_edit: true, max_message_size: 2000 });
    expect(JSON.stringify(ctx)).not.toContain(i.token);
  });

  it("gives a message command (Apps → command on a message) that message as input, and names it as the command's target", async () => {
    const target = { id: "M-TARGET-1", channel_id: "C1", content: "The quarterly numbers are up 12%.", author: { id: "U7", username: "bob" } };
    const i = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: target.id, resolved: { messages: { [target.id]: target } } });
    expect((await post(i)).body).toEqual({ type: 5 });
    const [ctx] = await waitFor(() => contextFor(target.content).length > 0 && contextFor(target.content));
    expect(ctx.event.data.command).toEqual({ name: "Summarize", path: [], options: {}, target: { type: "message", id: target.id, content: target.content, author_id: "U7", author_name: "bob" } });
  });

  it("reads a user command as chosen, its name and the user it was used on, and names that user as its target", async () => {
    const i = interaction(2, { id: "cmd-user", name: "Profile", type: 2, target_id: "U7", resolved: { users: { U7: { id: "U7", username: "bob", global_name: null } } } });
    expect((await post(i)).body).toEqual({ type: 5 });
    const ctx = await runOf(i);
    expect(ctx.input.text).toBe("/Profile @bob");
    expect(ctx.event.data.command.target).toEqual({ type: "user", id: "U7", name: "bob" });
    // Another command on the same user reads otherwise; a message command on a message without words, its name.
    const ban = interaction(2, { id: "cmd-ban", name: "Ban", type: 2, target_id: "U7", resolved: { users: { U7: { id: "U7", username: "bob", global_name: null } } } });
    const target = { id: "M-TARGET-2", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [] };
    const bare = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: target.id, resolved: { messages: { [target.id]: target } } });
    for (const x of [ban, bare]) expect((await post(x)).body).toEqual({ type: 5 });
    expect((await runOf(ban)).input.text).toBe("/Ban @bob");
    expect((await runOf(bare)).input.text).toBe("/Summarize");
  });

  it("gives a message command a forwarded message's words and files, a bot's embeds as text and mentions by name, never just its name or ids", async () => {
    const file = { id: "A9", filename: "report.txt", content_type: "text/plain", url: `${fake.url}/cdn/attachments/report.txt` };
    // A forward has no content of its own: what was forwarded is its snapshot.
    const forward = { id: "M-FWD", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [], message_reference: { type: 1, message_id: "M-ORIG" }, message_snapshots: [{ message: { type: 0, content: "Ship date moved to May 3.", attachments: [file], embeds: [] } }] };
    const fwd = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: forward.id, resolved: { messages: { [forward.id]: forward } } });
    // A bot's post that says everything in an embed; a user's link, whose preview is Discord's and not read, and whose
    // mentions read as the server shows those users (one Discord did not list stays as written).
    const embed = { type: "rich", author: { name: "CI" }, title: "Build #512 failed", url: "https://ci.example/512", description: "3 tests failed on main.", fields: [{ name: "Branch", value: "main", inline: true }, { name: "Commit", value: "abc123" }], footer: { text: "ci.example" } };
    const botPost = { id: "M-EMB", channel_id: "C1", content: "", author: { id: "B1", username: "ci-bot", bot: true }, attachments: [], embeds: [embed] };
    const botCmd = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: botPost.id, resolved: { messages: { [botPost.id]: botPost } } });
    const mentions = [{ id: "108", username: "cy", global_name: "Cy", member: { nick: "Cyrus" } }, { id: "109", username: "dee", global_name: null }];
    const link = { id: "M-LINK", channel_id: "C1", content: "<@108> <@!109> see https://news.example/a (<@404>)", author: { id: "U7", username: "bob" }, attachments: [], mentions, embeds: [{ type: "article", title: "Preview", description: "not said by bob" }] };
    const linkCmd = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: link.id, resolved: { messages: { [link.id]: link } } });
    for (const i of [fwd, botCmd, linkCmd]) expect((await post(i)).body).toEqual({ type: 5 });
    const forwarded = await runOf(fwd);
    expect(forwarded.input.text).toBe("Ship date moved to May 3.");
    expect(forwarded.input.attachments).toMatchObject([{ name: "report.txt", mime_type: "text/plain", size_bytes: FILE.length }]);
    expect(forwarded.event.data.command.target).toMatchObject({ type: "message", id: "M-FWD", content: "", forwarded: true });
    expect((await runOf(botCmd)).input.text).toBe("CI\nBuild #512 failed (https://ci.example/512)\n3 tests failed on main.\nBranch: main\nCommit: abc123\nci.example");
    const linked = await runOf(linkCmd);
    expect(linked.input.text).toBe("@Cyrus @dee see https://news.example/a (<@404>)");
    expect(linked.event.data.command.target.content).toBe(link.content);
  });

  it("gives a message command a poll as its question and answers (the votes once anyone voted) and a sticker as its name, as Telegram's read", async () => {
    const poll = {
      question: { text: "Lunch?" },
      answers: [{ answer_id: 1, poll_media: { text: "Pizza" } }, { answer_id: 2, poll_media: { text: "Sushi", emoji: { id: null, name: "🍣" } } }, { answer_id: 3, poll_media: { emoji: { id: "41771983429993937", name: "tacos" } } }],
      expiry: "2030-01-01T00:00:00.000000+00:00",
      allow_multiselect: true,
      layout_type: 1,
      results: { is_finalized: true, answer_counts: [{ id: 1, count: 2, me_voted: false }, { id: 2, count: 1, me_voted: true }] },
    };
    const pollPost = { id: "M-POLL", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [], embeds: [], poll };
    const unvoted = { ...pollPost, id: "M-POLL-2", poll: { ...poll, allow_multiselect: false, results: { is_finalized: false, answer_counts: [] } } };
    const stickerPost = { id: "M-STICKER", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [], sticker_items: [{ id: "749054660769218631", name: "Wave", format_type: 1 }] };
    // A forward of a sticker: its snapshot names it.
    const forward = { id: "M-FWD-STICKER", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [], message_snapshots: [{ message: { type: 0, content: "", attachments: [], embeds: [], sticker_items: [{ id: "1", name: "Party", format_type: 3 }] } }] };
    const commands = [pollPost, unvoted, stickerPost, forward].map((m) => interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: m.id, resolved: { messages: { [m.id]: m } } }));
    for (const i of commands) expect((await post(i)).body).toEqual({ type: 5 });
    const [voted, open, sticker, forwarded] = await Promise.all(commands.map(runOf));
    expect(voted.input.text).toBe("📊 Poll: Lunch? (multiple answers, closed)\n- Pizza (2 votes)\n- Sushi (1 votes)\n- :tacos: (0 votes)");
    expect(open.input.text).toBe("📊 Poll: Lunch?\n- Pizza\n- Sushi\n- :tacos:");
    expect(sticker.input.text).toBe("Sticker: Wave");
    expect(forwarded.input.text).toBe("Sticker: Party");
    expect(forwarded.event.data.command.target).toMatchObject({ id: "M-FWD-STICKER", forwarded: true });
  });

  it("reads a command with a subcommand as typed, so /todo add and /todo remove differ; a plain command is its values", async () => {
    const todo = (sub: string, item: string) => interaction(2, { id: "cmd-todo", name: "todo", type: 1, options: [{ name: sub, type: 1, options: [{ name: "item", type: 3, value: item }] }] });
    const add = todo("add", "milk");
    const remove = todo("remove", "milk");
    // A subcommand group: `/settings notify set on`; a subcommand without options: `/todo list`.
    const grouped = interaction(2, { id: "cmd-settings", name: "settings", type: 1, options: [{ name: "notify", type: 2, options: [{ name: "set", type: 1, options: [{ name: "enabled", type: 5, value: true }] }] }] });
    const list = interaction(2, { id: "cmd-todo", name: "todo", type: 1, options: [{ name: "list", type: 1 }] });
    for (const i of [add, remove, grouped, list]) expect((await post(i)).body).toEqual({ type: 5 });
    expect((await runOf(add)).input.text).toBe("/todo add milk");
    expect((await runOf(remove)).input.text).toBe("/todo remove milk");
    const settings = await runOf(grouped);
    expect(settings.input.text).toBe("/settings notify set true");
    expect(settings.event.data.command).toEqual({ name: "settings", path: ["notify", "set"], options: { enabled: true } });
    expect((await runOf(list)).input.text).toBe("/todo list");
  });

  it("names the users, roles and channels a command's options and a select menu pick as the server shows them, never as bare ids", async () => {
    const resolved = {
      users: { "222": { id: "222", username: "bob", global_name: "Bob" }, "333": { id: "333", username: "cy", global_name: null } },
      members: { "222": { nick: "Bobby", roles: [] } },
      roles: { "444": { id: "444", name: "Moderators" } },
      channels: { "555": { id: "555", name: "general", type: 0 } },
    };
    const options = [
      { name: "who", type: 6, value: "222" },
      { name: "where", type: 7, value: "555" },
      { name: "notify", type: 8, value: "444" },
      { name: "cc", type: 9, value: "333" },
      { name: "what", type: 3, value: "call mom" },
    ];
    const remind = interaction(2, { id: "cmd-remind", name: "remind", type: 1, options, resolved });
    expect((await post(remind)).body).toEqual({ type: 5 });
    const ctx = await runOf(remind);
    expect(ctx.input.text).toBe("@Bobby #general @Moderators @cy call mom");
    // The ids stay in the command's options.
    expect(ctx.event.data.command.options).toEqual({ who: "222", where: "555", notify: "444", cc: "333", what: "call mom" });

    const pick = interaction(3, { custom_id: "assign", component_type: 5, values: ["222", "333"], resolved }, { message: { id: "M2" } });
    expect((await post(pick)).body).toEqual({ type: 5 });
    const picked = await runOf(pick);
    expect(picked.input.text).toBe("@Bobby @cy");
    expect(picked.event.data.component).toEqual({ custom_id: "assign", component_type: 5, values: ["222", "333"] });
  });

  it("names the user by their server nickname, as the server shows them", async () => {
    const i = command("who am I", { member: { nick: "Captain Ada", user: { id: "U42", username: "ada", global_name: "Ada" } } });
    expect((await post(i)).body).toEqual({ type: 5 });
    expect((await runOf(i)).actor).toMatchObject({ actor_id: "U42", actor_name: "Captain Ada", metadata: { username: "ada" } });

    // A user command's target too.
    const profile = interaction(2, { id: "cmd-user", name: "Whois", type: 2, target_id: "U7", resolved: { users: { U7: { id: "U7", username: "bob", global_name: "Bob" } }, members: { U7: { nick: "Bobby" } } } });
    expect((await post(profile)).body).toEqual({ type: 5 });
    const whois = await runOf(profile);
    expect(whois.input.text).toBe("/Whois @Bobby");
    expect(whois.event.data.command.target).toEqual({ type: "user", id: "U7", name: "Bobby" });
  });

  it("resolves the deferred response with a short notice when the run fails before answering", async () => {
    const i = command("fail");
    expect((await post(i)).body).toEqual({ type: 5 });
    const [edit] = await waitFor(() => writesFor(i).length > 0 && writesFor(i));
    expect(edit.method).toBe("PATCH");
    expect(edit.path).toBe(`/webhooks/${APPLICATION_ID}/${i.token}/messages/@original`);
    expect(edit.body.content).toBe("Sorry, I could not answer this time.");

    // An agent's delivery policy words the notice in its bot's language.
    const zh = command("fail", { channel_id: "C7", channel: { id: "C7", type: 0 } });
    expect((await post(zh)).body).toEqual({ type: 5 });
    const [zhEdit] = await waitFor(() => writesFor(zh).length > 0 && writesFor(zh));
    expect(zhEdit.body.content).toBe("抱歉，这次没能回答。");
  });

  it("resolves the deferred response of a run a newer interaction interrupted", async () => {
    const interrupting = { agent_id: "discord-interrupt", name: "interrupt", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "C9" }, concurrency: { strategy: "interrupt" } };
    expect((await host.admin("POST", "/v1/admin/agents", interrupting)).status).toBe(201);
    const inC9 = { channel_id: "C9", channel: { id: "C9", type: 0 } };
    const first = command("sleep 5000", inC9);
    expect((await post(first)).body).toEqual({ type: 5 });
    await waitFor(() => contextFor("sleep 5000").length > 0);
    const second = command("newer", inC9);
    expect((await post(second)).body).toEqual({ type: 5 });
    const [edit] = await waitFor(() => writesFor(first).length > 0 && writesFor(first), 10_000, "the first interaction resolved");
    expect([edit.method, edit.path, edit.body.content]).toEqual(["PATCH", `/webhooks/${APPLICATION_ID}/${first.token}/messages/@original`, "(This answer was cancelled.)"]);
    expect((await host.waitForRun(contextFor("sleep 5000")[0].run_id)).status).toBe("cancelled");
    await waitFor(() => writesFor(second).some((w) => w.body.content === "echo: newer"));
  });

  it("tells an interaction sent before one already being answered (interrupt) that the newer one is answered instead, not that it is busy", async () => {
    const interrupting = { agent_id: "discord-interrupt-order", name: "interrupt", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "C12" }, concurrency: { strategy: "interrupt" } };
    expect((await host.admin("POST", "/v1/admin/agents", interrupting)).status).toBe(201);
    const inC12 = { channel_id: "C12", channel: { id: "C12", type: 0 } };
    const file = { A2: { id: "A2", filename: "slow.txt", content_type: "text/plain", url: `${fake.url}/cdn/attachments/slow.txt` } };
    // Sent first (the smaller snowflake), its file slow to download: it reaches the conversation after the next one.
    const older = interaction(2, { name: "summarize", type: 1, options: [{ name: "file", type: 11, value: "A2" }], resolved: { attachments: file } }, inC12);
    const newer = command("sleep 3000", inC12);
    const olderAck = post(older);
    await new Promise((r) => setTimeout(r, 50));
    expect((await post(newer)).body).toEqual({ type: 5 });
    expect((await olderAck).body).toEqual({ type: 4, data: { content: "A newer request here is answered instead of this one.", flags: 64 } });
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`discord:${botId}:${older.id}`]);
    expect(JSON.parse(row.metadata_json).rejection).toMatchObject({ reason: "newer_message", strategy: "interrupt" });
    await waitFor(() => writesFor(newer).some((w) => w.body.content === "echo: sleep 3000"), 10_000, "the newer interaction answered");
  });

  it("resolves the deferred response of an interaction cancelled while it waited its turn", async () => {
    const inC10 = { channel_id: "C10", channel: { id: "C10", type: 0 } };
    const busy = command("sleep 1500", inC10);
    expect((await post(busy)).body).toEqual({ type: 5 });
    await waitFor(() => contextFor("sleep 1500").length > 0);
    const waiting = command("waiting", inC10);
    expect((await post(waiting)).body).toEqual({ type: 5 });
    const [queued] = (await host.admin("GET", "/v1/runs?conversation_id=C10&status=created")).body.items;
    expect((await host.admin("POST", `/v1/runs/${queued.run_id}/cancel`)).status).toBe(202);
    const [edit] = await waitFor(() => writesFor(waiting).length > 0 && writesFor(waiting), 10_000, "the waiting interaction resolved");
    expect([edit.method, edit.path, edit.body.content]).toEqual(["PATCH", `/webhooks/${APPLICATION_ID}/${waiting.token}/messages/@original`, "(This answer was cancelled.)"]);
    await waitFor(() => writesFor(busy).some((w) => w.body.content === "echo: sleep 1500"));
    expect(contextFor("waiting")).toEqual([]);
  });

  it("resolves the deferred response of an interaction cancelled before its hand-over reached the conversation", async () => {
    const i = command("cancelled on its way", { channel_id: "C11", channel: { id: "C11", type: 0 } });
    // The database's answer to ingress's write is slow: the run is recorded (created) and cancelled before its hand-over.
    host.databaseOutage({ answerDelayMs: 1_500, matching: "cancelled on its way" });
    const posting = post(i);
    let runId: string | undefined;
    while (!(runId = (await host.admin("GET", "/v1/runs?conversation_id=C11&status=created")).body.items[0]?.run_id)) await new Promise((r) => setTimeout(r, 10));
    expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await posting).body).toEqual({ type: 5 });
    const [edit] = await waitFor(() => writesFor(i).length > 0 && writesFor(i), 10_000, "the interaction resolved");
    expect([edit.method, edit.path, edit.body.content]).toEqual(["PATCH", `/webhooks/${APPLICATION_ID}/${i.token}/messages/@original`, "(This answer was cancelled.)"]);
    expect((await host.waitForRun(runId)).status).toBe("cancelled");
    expect(contextFor("cancelled on its way")).toEqual([]);
  });

  it("a draft longer than the final answer leaves no stale follow-up text", async () => {
    const i = command("shrink");
    expect((await post(i)).body).toEqual({ type: 5 });
    const shown = () => {
      const latest = new Map<string, string>();
      for (const w of writesFor(i)) latest.set(w.method === "POST" ? (w.reply!.json as any).id : w.path.split("/messages/")[1], w.body.content);
      return latest;
    };
    await waitFor(() => shown().get("@original") === "short final" && [...shown().values()].filter((t) => t === "…").length === 1, 15_000);
    expect([...shown().values()].sort()).toEqual(["short final", "…"].sort());
    // The draft really spilled into a follow-up before the final answer shrank it.
    expect(writesFor(i).some((w) => w.method === "POST" && String(w.body.content).startsWith("line"))).toBe(true);
  });

  it("refuses a bad, foreign, missing or replayed signature with 401", async () => {
    const before = runner.calls.length;
    const body = JSON.stringify(command("forged"));
    const other = generateKeyPairSync("ed25519").privateKey;
    const foreign = await postRaw(body, signed(body, other));
    const tampered = await postRaw(body.replace("forged", "forgee"), signed(body));
    const missing = await postRaw(body, {});
    // Signed by Discord, but six minutes ago: a captured request replayed.
    const replayed = await postRaw(body, signed(body, privateKey, Date.now() - 6 * 60_000));
    expect(replayed.body.error.message).toMatch(/X-Signature-Timestamp is more than 5 minutes away/);
    for (const res of [foreign, tampered, missing, replayed]) expect(res.status).toBe(401);
    // Nothing was recorded, so nothing can run.
    expect(await host.query("SELECT 1 FROM event_log WHERE input_summary IN ('forged', 'forgee')")).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });

  it("never runs a replayed interaction twice", async () => {
    const i = command("just once");
    await post(i);
    await waitFor(() => writesFor(i).length > 0);
    expect(await post(i)).toEqual({ status: 200, body: { type: 5 } });
    // A barrier instead of a sleep: once a later command of the channel is answered, a second run of the first would have been too.
    const marker = command("marker");
    await post(marker);
    await waitFor(() => writesFor(marker).length > 0);
    expect(contextFor("just once")).toHaveLength(1);
    expect(writesFor(i)).toHaveLength(1);
  });

  it("streams by editing the original response at most once a second, ending exactly on the final text", async () => {
    const i = command("stream red green blue cyan magenta");
    await post(i);
    const final = "red green blue cyan magenta";
    const writes = await waitFor(() => writesFor(i).some((w) => w.body.content === final) && writesFor(i), 15_000, "the final edit");
    expect(writes.every((w) => w.method === "PATCH" && w.path.endsWith("/messages/@original"))).toBe(true);
    expect(writes.length).toBeGreaterThanOrEqual(2);
    expect(writes.at(-1)!.body.content).toBe(final);
    for (const gap of gapsBetween(writes.map((w) => w.at))) expect(gap).toBeGreaterThanOrEqual(950);
  });

  it("a stream that outgrows 2000 characters continues in a follow-up, both ending exact", async () => {
    const i = command("bigstream 5 600");
    await post(i);
    const runId = await waitFor(() => contextFor("bigstream 5 600")[0]?.run_id);
    const final = ((await host.waitForRun(runId)).message as { content: string }).content;
    expect(final.length).toBeGreaterThan(2000);
    const settled = () => {
      const shown = new Map<string, string>();
      for (const w of writesFor(i)) shown.set(w.method === "POST" ? (w.reply!.json as any).id : w.path.split("/messages/")[1], w.body.content);
      return [...shown.values()];
    };
    const messages = await waitFor(() => settled().join("") === final && settled(), 15_000, "the exact final text across messages");
    expect(messages).toHaveLength(2);
    expect(messages.every((m) => m.length <= 2000)).toBe(true);
    const original = writesFor(i).filter((w) => w.path.endsWith("/messages/@original"));
    for (const gap of gapsBetween(original.map((w) => w.at))) expect(gap).toBeGreaterThanOrEqual(950);
  });

  it("sends a table, which Discord's Markdown lacks, as an aligned code block; the rest of the Markdown as written, for Discord to render", async () => {
    const i = command(`samefinal ${TABLE_ANSWER}`);
    await post(i);
    const [edit] = await waitFor(() => writesFor(i).length > 0 && writesFor(i), 15_000, "the answer");
    expect(edit.body.content).toBe(
      [
        "Prices:",
        "```",
        ...TABLE_ALIGNED,
        "```",
        ...TABLE_ANSWER.split("\n").slice(6),
      ].join("\n"),
    );
  });

  it("splits a long answer: the original response, then follow-up messages", async () => {
    const i = command("long 4500");
    await post(i);
    const writes = await waitFor(() => writesFor(i).length >= 3 && writesFor(i));
    expect(writes.map((w) => w.method)).toEqual(["PATCH", "POST", "POST"]);
    expect(writes[1].query.get("wait")).toBe("true");
    expect(writes.every((w) => w.body.content.length <= 2000)).toBe(true);
    expect(writes.map((w) => w.body.content).join("")).toHaveLength(4500);
  });

  it("makes again an edit of the original response that may have been applied, never writing the next part over it", async () => {
    const i = command("long 3000");
    gatewayTimeouts.add(i.token);
    await post(i);
    const writes = await waitFor(() => writesFor(i).length >= 3 && writesFor(i));
    // The edit is repeated (the same text twice shows once); the second part is a follow-up, not an edit of the original.
    expect(writes.map((w) => [w.method, w.path.endsWith("/@original")])).toEqual([["PATCH", true], ["PATCH", true], ["POST", false]]);
    expect(writes[1].body.content).toBe(writes[0].body.content);
    expect(writes.slice(1).map((w) => w.body.content).join("")).toHaveLength(3000);
  });

  it("waits the retry_after of a 429 (seconds, fractional) before editing again", async () => {
    const i = command("discord busy");
    throttledTokens.add(i.token);
    await post(i);
    const writes = await waitFor(() => writesFor(i).length >= 2 && writesFor(i));
    expect(writes[1].at - writes[0].at).toBeGreaterThanOrEqual(280);
    const runId = contextFor("discord busy")[0].run_id;
    const failed = await waitFor(async () => (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]))[0]);
    expect(JSON.parse(failed.data_json)).toMatchObject({ status: 429, retry_after_ms: 300, will_retry: true });
  });
});

describe("Discord: what this file sent and was answered", () => {
  it("keeps the bot's credentials out of every answer, record, stored payload and log line", () => platform.keepsSecretsOut());
});
