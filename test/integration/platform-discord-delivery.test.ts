import { generateKeyPairSync } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ANSWER_FILE, fileOf, formOf, gapsBetween, waitFor, type PlatformCall } from "../support/fake-platform";
import { useDiscordPlatform, type DiscordPlatform } from "../support/discord-platform";

/** Discord answers under limits: rate buckets, presses, components, secrets, user installs, files, expired tokens and deleted placeholders. */
const platform = useDiscordPlatform();
const { APPLICATION_ID, BOT_TOKEN, FILE, expiredTokens, expiringTokens, channelHistory, throttledEdits, throttledHistory, userInstallTokens, bucketedTokens, deletedResponses, deletingResponses, deletedChannelMessages, answered, postRaw, signed, post, interaction, command, writesFor, contextFor, runOf } = platform;
let host: DiscordPlatform["host"];
let fake: DiscordPlatform["fake"];
let botId: string;
beforeAll(() => void ({ host, fake, botId } = platform));

describe("Discord: interactions over HTTP, answered by editing the deferred response", () => {
  it("waits out a bucket Discord says is spent (X-RateLimit-Remaining: 0) before the next call of that route, rather than meeting a 429", async () => {
    const i = command("long 6500");
    bucketedTokens.add(i.token);
    await post(i);
    const runId = (await runOf(i)).run_id;
    await host.waitForRun(runId);
    const writes = await waitFor(() => writesFor(i).filter((w) => w.reply?.status === undefined || w.reply.status < 300).length >= 4 && writesFor(i), 15_000, "every part");
    expect(writes.map((w) => [w.method, w.reply?.status ?? 200])).toEqual([["PATCH", 200], ["POST", 200], ["POST", 200], ["POST", 200]]);
    expect(writes.map((w) => w.body.content).join("")).toHaveLength(6500);
    // Each follow-up waited for its bucket's reset (0.6 s) after the one before.
    for (const gap of gapsBetween(writes.slice(1).map((w) => w.at))) expect(gap).toBeGreaterThanOrEqual(550);
    const failed = await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
    expect(failed).toEqual([]);
  });

  it("answers a button pressed twice in quick succession once: the second interaction gets a private notice, not a \"thinking…\" nothing would answer", async () => {
    const inC14 = { channel_id: "C14", channel: { id: "C14", type: 0 }, message: { id: "M14" } };
    const [first, second] = [interaction(3, { custom_id: "btn_go", component_type: 2 }, inC14), interaction(3, { custom_id: "btn_go", component_type: 2 }, inC14)];
    const acks = (await Promise.all([post(first), post(second)])).map((a) => a.body);
    expect(acks).toContainEqual({ type: 5 });
    expect(acks).toContainEqual({ type: 4, data: { content: "Already answering your earlier press of this button.", flags: 64 } });
    const answeredOne = acks[0].type === 5 ? first : second;
    const repeated = answeredOne === first ? second : first;
    await waitFor(() => writesFor(answeredOne).some((w) => w.body?.content === "echo: btn_go"), 10_000, "the press's answer");
    await new Promise((r) => setTimeout(r, 300));
    expect(writesFor(repeated)).toEqual([]);
    expect(contextFor("btn_go")).toHaveLength(1);
  });

  it("runs message components, keeps thread channels as threads, and stores attachment options", async () => {
    const button = interaction(3, { custom_id: "btn_yes", component_type: 2 }, { message: { id: "M1" } });
    expect((await post(button)).body).toEqual({ type: 5 });
    await waitFor(() => writesFor(button).length > 0);
    expect(contextFor("btn_yes")[0].event).toMatchObject({ source_event_type: "MESSAGE_COMPONENT", data: { component: { custom_id: "btn_yes" }, message_id: "M1" } });

    const inThread = command("in a thread", { channel_id: "T9", channel: { id: "T9", type: 11, parent_id: "C1" } });
    await post(inThread);
    await waitFor(() => writesFor(inThread).length > 0);
    expect(contextFor("in a thread")[0].conversation).toMatchObject({ conversation_id: "C1", thread_id: "T9" });

    const withFile = interaction(2, {
      name: "summarize",
      type: 1,
      options: [{ name: "file", type: 11, value: "A1" }],
      resolved: { attachments: { A1: { id: "A1", filename: "report.txt", content_type: "text/plain", url: `${fake.url}/cdn/attachments/report.txt` } } },
    });
    await post(withFile);
    await waitFor(() => writesFor(withFile).length > 0);
    const ctx = contextFor("/summarize")[0];
    expect(ctx.input.attachments[0]).toMatchObject({ name: "report.txt", mime_type: "text/plain", size_bytes: FILE.length });
  });

  it("answers each autocomplete keystroke at once with no choices, storing and recording none of them", async () => {
    const rawsBefore = (await host.r2Keys("raw/")).length;
    const keystrokes = ["h", "he", "hel"].map((value) => interaction(4, { name: "ask", type: 1, options: [{ name: "question", type: 3, value, focused: true }] }));
    for (const auto of keystrokes) expect(await post(auto)).toEqual({ status: 200, body: { type: 8, data: { choices: [] } } });
    const rows = await host.query("SELECT event_id FROM event_log WHERE source_event_type = 'APPLICATION_COMMAND_AUTOCOMPLETE'");
    expect(rows).toEqual([]);
    expect(await host.r2Keys("raw/")).toHaveLength(rawsBefore);
    // Still verified first: a forged keystroke is refused.
    const forged = JSON.stringify(keystrokes[0]);
    expect((await postRaw(forged, signed(forged, generateKeyPairSync("ed25519").privateKey))).status).toBe(401);
  });

  it("keeps the bot token and interaction tokens out of every answer, record and log line", async () => {
    const i = command("token check");
    await post(i);
    await waitFor(() => writesFor(i).length > 0);
    const forged = JSON.stringify(command("forged"));
    await postRaw(forged, signed(forged, generateKeyPairSync("ed25519").privateKey));
    const got = await host.admin("GET", `/v1/admin/bots/${botId}`);
    answered.push(JSON.stringify(got.body));
    expect(got.body.credential_fields).toEqual(["application_id", "bot_token", "public_key"]);
    const records = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    const raws = await Promise.all((await host.r2Keys("raw/")).map(async (k) => new TextDecoder().decode((await host.r2Object(k))!)));
    expect(raws.length).toBeGreaterThan(0);
    expect(host.logs()).toMatch(/webhook refused/);
    for (const text of [...answered, ...records.map((r) => r.row), ...raws, host.logs()]) {
      expect(text).not.toContain(BOT_TOKEN);
      expect(text).not.toMatch(/interaction-token-\d+-secret/);
    }
  });
});

describe("Discord: an app installed only to the user (5 follow-ups per interaction)", () => {
  const inDm = { guild_id: undefined, member: undefined, user: { id: "U42", username: "ada", global_name: "Ada" }, channel_id: "D5", channel: { id: "D5", type: 1 }, context: 2 };
  const shownBy = (i: { token: string }) => {
    const shown = new Map<string, string>();
    for (const w of writesFor(i).filter((w) => (w.reply?.status ?? 200) < 300)) shown.set(w.method === "POST" ? (w.reply!.json as any).id : w.path.split("/messages/")[1], w.body.content);
    return shown;
  };
  const limitRefusals = async (runId: string) =>
    (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId])).map((r) => JSON.parse(r.data_json));

  it("shows what fits in the response and 5 follow-ups, the last saying the rest was cut, and records each part not shown", async () => {
    const i = command("long 14000", { ...inDm, authorizing_integration_owners: { "1": "U42" } });
    userInstallTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = (await runOf(i)).run_id;
    const final = ((await host.waitForRun(runId)).message as { content: string }).content;
    const refused = await waitFor(async () => ((await limitRefusals(runId)).length >= 2 ? limitRefusals(runId) : false), 15_000, "the parts past the limit recorded");
    expect(refused.every((r) => r.operation === "send" && r.code === "discord_followup_limit" && r.will_retry === false)).toBe(true);
    // Never past what Discord takes: the response, 5 follow-ups, then the last of them edited to say the rest was cut.
    const writes = writesFor(i);
    expect(writes.map((w) => [w.method, w.reply?.status ?? 200])).toEqual([["PATCH", 200], ...Array(5).fill(["POST", 200]), ["PATCH", 200]]);
    const lastFollowup = (writes[5].reply!.json as { id: string }).id;
    expect(writes[6].path).toBe(`/webhooks/${APPLICATION_ID}/${i.token}/messages/${lastFollowup}`);
    const messages = [...shownBy(i).values()];
    expect(messages).toHaveLength(6);
    expect(messages.every((m) => m.length <= 2000)).toBe(true);
    expect(messages.at(-1)).toMatch(/\n\n\(Discord lets this app post only 6 messages in reply here: the rest of this answer was cut\.\)$/);
    // The answer's start, in order, up to the notice.
    const shownText = messages.join("").replace(/\n\n\(Discord lets[^)]*\)$/, "");
    expect(final.startsWith(shownText.trimEnd())).toBe(true);
    expect(shownText.length).toBeGreaterThan(5 * 1900);

    // Installed to the server as well, the interaction is not limited: every part is posted.
    const both = command("long 14000", { authorizing_integration_owners: { "0": "G1", "1": "U42" } });
    expect((await post(both)).body).toEqual({ type: 5 });
    const bothFinal = ((await host.waitForRun((await runOf(both)).run_id)).message as { content: string }).content;
    await waitFor(() => [...shownBy(both).values()].join("") === bothFinal, 15_000, "the whole answer");
    expect(shownBy(both).size).toBeGreaterThan(6);
  });

  it("says so too when Discord refuses a follow-up for the limit the interaction did not name, and asks no more", async () => {
    const i = command("long 14000", { ...inDm, channel_id: "D6", channel: { id: "D6", type: 1 } });
    userInstallTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = (await runOf(i)).run_id;
    await host.waitForRun(runId);
    await waitFor(async () => (await limitRefusals(runId)).length >= 2, 15_000, "the parts past the limit recorded");
    expect(writesFor(i).map((w) => [w.method, w.reply?.status ?? 200])).toEqual([["PATCH", 200], ...Array(5).fill(["POST", 200]), ["POST", 400], ["PATCH", 200]]);
    expect([...shownBy(i).values()].at(-1)).toMatch(/the rest of this answer was cut\.\)$/);
    expect((await limitRefusals(runId)).map((r) => r.code)).toEqual(Array((await limitRefusals(runId)).length).fill("discord_followup_limit"));
  });
});

describe("Discord: files in answers", () => {
  const fileWrite = async (call: PlatformCall) => {
    const form = await formOf(call);
    return { payload: JSON.parse(String(form.get("payload_json"))), file: await fileOf(form, "files[0]") };
  };

  it("sends a file as a follow-up after the text, with the same mention guard", async () => {
    const i = command("attach chart.png");
    await post(i);
    const writes = await waitFor(() => writesFor(i).length >= 2 && writesFor(i), 15_000, "the follow-up");
    expect(writes[0]).toMatchObject({ method: "PATCH", path: `/webhooks/${APPLICATION_ID}/${i.token}/messages/@original`, body: { content: "here is chart.png" } });
    expect(writes[1]).toMatchObject({ method: "POST", path: `/webhooks/${APPLICATION_ID}/${i.token}` });
    expect(writes[1].query.get("wait")).toBe("true");
    const { payload, file } = await fileWrite(writes[1]);
    expect(payload).toEqual({ content: "", allowed_mentions: { parse: [] }, attachments: [{ id: 0, filename: "chart.png" }] });
    expect(file).toMatchObject({ name: "chart.png", type: "image/png" });
    expect(file.bytes.equals(ANSWER_FILE)).toBe(true);
  });

  it("names a file by its type's extension when the runner gave it no name, or one without an extension: Discord shows an image by its name", async () => {
    const unnamed = command("attachas image/png");
    const bare = command("attachas application/pdf quarterly-report");
    await post(unnamed);
    await post(bare);
    const sent = async (i: ReturnType<typeof command>) => (await fileWrite((await waitFor(() => writesFor(i).length >= 2 && writesFor(i), 15_000, "the follow-up"))[1])).file;
    const image = await sent(unnamed);
    const [stored] = await host.query<{ artifact_id: string; name: string | null }>("SELECT artifact_id, name FROM artifact WHERE run_id = ?", [contextFor("attachas image/png")[0].run_id]);
    // The stored artifact keeps no name: only what the chat is sent is named.
    expect(stored.name).toBeNull();
    expect(image).toMatchObject({ name: `${stored.artifact_id}.png`, type: "image/png" });
    expect(await sent(bare)).toMatchObject({ name: "quarterly-report.pdf", type: "application/pdf" });
  });

  it("resolves the deferred response with the file itself when the answer is files only", async () => {
    const i = command("attachonly report.pdf");
    await post(i);
    const [write] = await waitFor(() => writesFor(i).length >= 1 && writesFor(i), 15_000, "the answer");
    expect(write).toMatchObject({ method: "PATCH", path: `/webhooks/${APPLICATION_ID}/${i.token}/messages/@original` });
    const { file } = await fileWrite(write);
    expect(file).toMatchObject({ name: "report.pdf", type: "application/pdf" });
    expect(file.bytes.equals(ANSWER_FILE)).toBe(true);
    await host.waitForRun(contextFor("attachonly report.pdf")[0].run_id);
    const runId = contextFor("attachonly report.pdf")[0].run_id;
    // Sent, so no "could not be sent" notice follows it.
    const records = await waitFor(async () => {
      const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId]);
      return rows.length > 0 && rows;
    });
    expect(records.map((r) => JSON.parse(r.data_json).operation)).toEqual(["send_file"]);
    expect(writesFor(i)).toHaveLength(1);
  });
});

describe("Discord: a file over the upload limit", () => {
  it("is not sent: the text is, and the record says why", async () => {
    const size = 10 * 1024 * 1024 + 1;
    const i = command(`upload huge.pdf ${size}`);
    await post(i);
    const runId = await waitFor(() => contextFor(`upload huge.pdf ${size}`)[0]?.run_id, 30_000, "the run");
    expect(contextFor(`upload huge.pdf ${size}`)[0].delivery.platform_capabilities.files).toEqual({ max_bytes: 10 * 1024 * 1024 });
    const failed = await waitFor(async () => {
      const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
      return rows.length > 0 && rows.map((r) => JSON.parse(r.data_json));
    }, 30_000, "the delivery record");
    expect(failed).toMatchObject([{ operation: "send_file", code: "file_too_large", will_retry: false }]);
    expect(failed[0].error).toContain(`${size} bytes`);
    expect(writesFor(i).map((w) => [w.method, w.body?.content])).toEqual([["PATCH", "here is huge.pdf"]]);
  });
});

const channelWrites = (since: number) => fake.calls.filter((c) => c.path.startsWith("/channels/") && c.method !== "GET" && c.at >= since);
const deliveryRecords = async (runId: string) =>
  (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId])).map((r) => [
    r.event_type,
    JSON.parse(r.data_json).operation,
  ]);

describe("Discord: answers after the interaction token expires", () => {

  it("continues in the interaction's channel with the bot token, text and files, once Discord refuses the token (new messages when the placeholder cannot be found)", async () => {
    const since = Date.now();
    const i = command("attach late.png", { channel_id: "C21", channel: { id: "C21", type: 0 } });
    expiredTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const writes = await waitFor(() => channelWrites(since).length >= 2 && channelWrites(since), 15_000, "the channel messages");
    // The deferred response was tried first, once; then the bot's own API.
    expect(writesFor(i).map((w) => [w.method, w.reply?.status])).toEqual([["PATCH", 401]]);
    expect(writes[0]).toMatchObject({ method: "POST", path: "/channels/C21/messages", body: { content: "here is late.png", allowed_mentions: { parse: [] } } });
    expect(writes.every((w) => w.headers.authorization === `Bot ${BOT_TOKEN}`)).toBe(true);
    const form = await formOf(writes[1]);
    expect(JSON.parse(String(form.get("payload_json")))).toEqual({ content: "", allowed_mentions: { parse: [] }, attachments: [{ id: 0, filename: "late.png" }] });
    expect((await fileOf(form, "files[0]")).bytes.equals(ANSWER_FILE)).toBe(true);
    const runId = contextFor("attach late.png")[0].run_id;
    await host.waitForRun(runId);
    expect(await waitFor(async () => (await deliveryRecords(runId)).length >= 2 && deliveryRecords(runId))).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send_file"],
    ]);
  });

  it("replaces the “thinking…” placeholder it finds in the channel's history when the token was refused before the first answer", async () => {
    const since = Date.now();
    const i = command("attach later.png", { channel_id: "C23", channel: { id: "C23", type: 0 } });
    // Newest first: a later message, the placeholder (marked with its interaction), another interaction's, one from before.
    const after = (n: number) => String(BigInt(i.id) + BigInt(n));
    channelHistory.set("C23", [
      { id: after(9), content: "someone else" },
      { id: after(2), content: "", flags: 128, interaction_metadata: { id: i.id, type: 2 } },
      { id: after(1), content: "", interaction_metadata: { id: "1", type: 2 } },
      { id: String(BigInt(i.id) - 5n), content: "before" },
    ]);
    expiredTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const writes = await waitFor(() => channelWrites(since).length >= 2 && channelWrites(since), 15_000, "the channel messages");
    const [search] = fake.calls.filter((c) => c.method === "GET" && c.path === "/channels/C23/messages" && c.at >= since);
    expect(Object.fromEntries(search.query)).toEqual({ after: i.id, limit: "50" });
    expect(search.headers.authorization).toBe(`Bot ${BOT_TOKEN}`);
    expect(writes[0]).toMatchObject({ method: "PATCH", path: `/channels/C23/messages/${after(2)}`, body: { content: "here is later.png" } });
    expect(writes[1]).toMatchObject({ method: "POST", path: "/channels/C23/messages" });
    expect((await fileOf(await formOf(writes[1]), "files[0]")).bytes.equals(ANSWER_FILE)).toBe(true);
    const runId = contextFor("attach later.png")[0].run_id;
    await host.waitForRun(runId);
    expect(await waitFor(async () => (await deliveryRecords(runId)).length >= 2 && deliveryRecords(runId))).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send_file"],
    ]);
  });

  it("waits out a rate-limited edit of the placeholder and edits it again, rather than posting a second message beside it", async () => {
    const since = Date.now();
    const i = command("hello placeholder", { channel_id: "C24", channel: { id: "C24", type: 0 } });
    const placeholder = String(BigInt(i.id) + 2n);
    channelHistory.set("C24", [{ id: placeholder, content: "", flags: 128, interaction_metadata: { id: i.id, type: 2 } }]);
    throttledEdits.add(placeholder);
    expiredTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => contextFor("hello placeholder")[0]?.run_id);
    await host.waitForRun(runId);
    await waitFor(async () => (await deliveryRecords(runId)).some(([t]) => t === "delivery.succeeded"), 15_000, "the answer");
    const writes = channelWrites(since);
    expect(writes.map((w) => [w.method, w.path, w.reply?.status ?? 200])).toEqual([
      ["PATCH", `/channels/C24/messages/${placeholder}`, 429],
      ["PATCH", `/channels/C24/messages/${placeholder}`, 200],
    ]);
    expect(writes[1].at - writes[0].at).toBeGreaterThanOrEqual(250);
  });

  it("looks for the placeholder again after a rate-limited read of the channel's history, rather than posting beside it", async () => {
    const since = Date.now();
    const i = command("hello again placeholder", { channel_id: "C25", channel: { id: "C25", type: 0 } });
    const placeholder = String(BigInt(i.id) + 2n);
    channelHistory.set("C25", [{ id: placeholder, content: "", flags: 128, interaction_metadata: { id: i.id, type: 2 } }]);
    throttledHistory.add("C25");
    expiredTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => contextFor("hello again placeholder")[0]?.run_id);
    await host.waitForRun(runId);
    await waitFor(async () => (await deliveryRecords(runId)).some(([t]) => t === "delivery.succeeded"), 15_000, "the answer");
    const searches = fake.calls.filter((c) => c.method === "GET" && c.path === "/channels/C25/messages" && c.at >= since);
    expect(searches.map((c) => c.reply?.status ?? 200)).toEqual([429, 200]);
    expect(searches[1].at - searches[0].at).toBeGreaterThanOrEqual(250);
    expect(channelWrites(since).map((w) => [w.method, w.path, w.body?.content])).toEqual([["PATCH", `/channels/C25/messages/${placeholder}`, "echo: hello again placeholder"]]);
  });

  it("a stream whose token expires mid-way edits its message by id with the bot token and ends exactly on the final text", async () => {
    const since = Date.now();
    const i = command("stream one two three four five six", { channel_id: "C22", channel: { id: "C22", type: 0 } });
    expiringTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => contextFor("stream one two three four five six")[0]?.run_id);
    await host.waitForRun(runId);
    const final = "one two three four five six";
    await waitFor(() => channelWrites(since).at(-1)?.body.content === final, 15_000, "the final edit");
    // The first write resolved the deferred response; every later one edits that same message through the channel.
    expect(writesFor(i).filter((w) => w.reply?.status === undefined || w.reply.status < 300)).toHaveLength(1);
    const edits = channelWrites(since);
    expect(edits.every((w) => w.method === "PATCH" && w.path === "/channels/C22/messages/original_msg")).toBe(true);
    expect(edits.length).toBeGreaterThan(1);
    expect((await deliveryRecords(runId)).filter(([t]) => t === "delivery.failed")).toEqual([]);
  });
});

describe("Discord: answers whose “thinking…” was deleted meanwhile (discord/discord-api-docs#3087)", () => {
  it("continues in the interaction's channel with the bot token, text and files, not looking for the deleted placeholder", async () => {
    const since = Date.now();
    const i = command("attach gone.png", { channel_id: "C31", channel: { id: "C31", type: 0 } });
    deletedResponses.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const writes = await waitFor(() => channelWrites(since).length >= 2 && channelWrites(since), 15_000, "the channel messages");
    expect(writesFor(i).map((w) => [w.method, w.reply?.status])).toEqual([["PATCH", 404]]);
    expect(writes[0]).toMatchObject({ method: "POST", path: "/channels/C31/messages", body: { content: "here is gone.png", allowed_mentions: { parse: [] } } });
    expect(writes[0].headers.authorization).toBe(`Bot ${BOT_TOKEN}`);
    expect(writes[1]).toMatchObject({ method: "POST", path: "/channels/C31/messages" });
    expect((await fileOf(await formOf(writes[1]), "files[0]")).bytes.equals(ANSWER_FILE)).toBe(true);
    expect(fake.calls.filter((c) => c.method === "GET" && c.path === "/channels/C31/messages")).toEqual([]);
    const runId = contextFor("attach gone.png")[0].run_id;
    await host.waitForRun(runId);
    expect(await waitFor(async () => (await deliveryRecords(runId)).length >= 2 && deliveryRecords(runId))).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send_file"],
    ]);
  });

  it("a stream whose message was deleted mid-way ends in the channel as a new message with exactly the final text", async () => {
    const since = Date.now();
    const i = command("stream alpha beta gamma delta epsilon zeta", { channel_id: "C32", channel: { id: "C32", type: 0 } });
    deletingResponses.add(i.token);
    deletedChannelMessages.add("C32/original_msg");
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => contextFor("stream alpha beta gamma delta epsilon zeta")[0]?.run_id);
    await host.waitForRun(runId);
    const final = "alpha beta gamma delta epsilon zeta";
    await waitFor(() => channelWrites(since).some((w) => w.method === "POST"), 15_000, "the answer in the channel");
    // The first write showed the draft; the response's edit was then refused (deleted), and its copy in the channel too.
    expect(writesFor(i).map((w) => [w.method, w.reply?.status ?? 200])).toEqual([
      ["PATCH", 200],
      ["PATCH", 404],
    ]);
    expect(channelWrites(since).filter((w) => w.method === "POST").map((w) => [w.path, w.body.content])).toEqual([["/channels/C32/messages", final]]);
    expect((await waitFor(async () => (await deliveryRecords(runId)).at(-1)?.[1] === "send" && deliveryRecords(runId))).filter(([t]) => t === "delivery.succeeded")).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send"],
    ]);
  });
});
