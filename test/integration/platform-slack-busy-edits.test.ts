import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { useBusySlack, type BusySlack } from "../support/slack-busy";

/** A Slack channel busy with a run (README "A busy conversation"): a message waiting its turn deleted, a message edited during its hand-over, one deleted or edited after it was answered. */
const platform = useBusySlack();
const { state, FILE, runsOf, pulledOf, historyOf, filesOf, recordsOf, deliver, interact, say, sayHeldFirst, tsOnceRecorded, deletion, edit, eventIdOf, postsTo, runOfEvent, quiet, agentFor } = platform;
let setup: BusySlack["setup"];
let host: BusySlack["host"];
let fake: BusySlack["fake"];
let botId: string;
beforeAll(() => void ({ setup, host, fake, botId } = platform));

describe("Slack: a message deleted or edited before it is answered", () => {
  it("enqueue: a message deleted while its run waits its turn never runs (its run ends cancelled); one already running is answered", async () => {
    const channel = "CBUSY2";
    await agentFor(channel, "plain", "enqueue");
    const first = await sayHeldFirst(channel);
    const second = await say(channel, "second");
    await say(channel, "third");
    await deliver(deletion(channel, second));
    // The running run's message deleted: its runner has it already, so it goes on.
    await deliver(deletion(channel, first));
    expect(await runOfEvent(eventIdOf(channel, second))).toEqual({ status: "cancelled", error_code: "cancelled", error_message: "its message was recalled before it was answered" });
    setup.gate(channel).resolve();
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "third"]);
    expect(postsTo(channel)).toEqual(["re: hold first", "re: third"]);
    expect((await runOfEvent(eventIdOf(channel, first))).status).toBe("completed");
  }, 40_000);

  it("an edit of a message still waiting is answered as edited, queued or claimed; an older edit arriving late changes nothing", async () => {
    const queued = "CBUSY3";
    await agentFor(queued, "plain", "enqueue");
    await sayHeldFirst(queued);
    const typo = await say(queued, "secnod");
    await deliver(edit(queued, typo, "second, fixed", "1800009999.000002"));
    await deliver(edit(queued, typo, "second, half fixed", "1800009999.000001"));
    setup.gate(queued).resolve();
    await quiet(queued, 2);
    expect(runsOf.get(queued)).toEqual(["hold first", "second, fixed"]);

    const claimed = "CBUSY4";
    await agentFor(claimed, "steerer", "steer");
    await sayHeldFirst(claimed);
    const mention = await say(claimed, "waht time", "app_mention");
    // Slack reports an edit of a message naming the bot twice: message_changed, and app_mention again marked edited.
    await deliver(edit(claimed, mention, "what time", "1800009999.000003"));
    await deliver({ type: "app_mention", channel: claimed, user: "U42", text: "what time", ts: mention, team: "T1", edited: { user: "U42", ts: "1800009999.000003" } });
    setup.gate(claimed).resolve();
    await quiet(claimed, 1);
    expect(pulledOf.get(claimed)).toEqual(["what time"]);
    expect(postsTo(claimed)).toEqual(["re: hold first+what time"]);
  }, 40_000);

  it("an edit made while its run is being claimed (the database slow), its runner not called yet, is what its runner gets", async () => {
    // Claimed as the idle channel's message is decided, or by the scheduler once its debounce is over.
    for (const [channel, debounce] of [["CBUSY8", 0], ["CBUSY9", 300]] as const) {
      await agentFor(channel, "plain", "enqueue", debounce ? { debounce_ms: debounce } : {});
      // The claim (the one query that sets started_at), held back.
      host.databaseOutage({ delayMs: 1_500, matching: "started_at" });
      const typo = await say(channel, "secnod");
      await new Promise((r) => setTimeout(r, debounce * 2));
      await deliver(edit(channel, typo, "second", "1800009999.000007"));
      await quiet(channel, 1);
      expect(runsOf.get(channel)).toEqual(["second"]);
      expect(postsTo(channel)).toEqual(["re: second"]);
    }
  }, 40_000);

  it("an edit made while its message's hand-over to its conversation is on its way (the database's answer slow) is what its runner gets", async () => {
    const channel = "CBUSY10";
    await agentFor(channel, "plain", "enqueue");
    // The batch that records the message and its run (the one that reads latest_transcript_seq) applied, its answer held back.
    host.databaseOutage({ answerDelayMs: 1_500, matching: "latest_transcript_seq" });
    const said = say(channel, "secnod");
    await deliver(edit(channel, await tsOnceRecorded(channel, "secnod"), "second", "1800009999.000008"));
    await said;
    await quiet(channel, 1);
    expect(runsOf.get(channel)).toEqual(["second"]);
    expect(postsTo(channel)).toEqual(["re: second"]);
  }, 40_000);

  it("an older edit arriving after a newer one reached the message during its hand-over changes nothing: its run starts with the newer words", async () => {
    const channel = "CBUSY19";
    await agentFor(channel, "plain", "enqueue");
    await sayHeldFirst(channel);
    // The hand-over's answer held back: the newer edit is kept for it; the run then waits its turn, and the older edit comes.
    host.databaseOutage({ answerDelayMs: 1_500, matching: "latest_transcript_seq" });
    const said = say(channel, "secnod");
    const ts = await tsOnceRecorded(channel, "secnod");
    await deliver(edit(channel, ts, "second, fixed", "1800009999.000016"));
    await said;
    await deliver(edit(channel, ts, "second, half fixed", "1800009999.000015"));
    setup.gate(channel).resolve();
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "second, fixed"]);
  }, 40_000);

  it("steer: an edit made during its message's hand-over reaches the runner also when that hand-over's claim is refused and Slack sends the message again", async () => {
    const channel = "CBUSY14";
    await agentFor(channel, "steerer", "steer");
    await sayHeldFirst(channel);
    // The message and its run recorded, the answer slow: the edit is held for the hand-over, whose claim is then refused.
    host.databaseOutage({ answerDelayMs: 1_500, matching: "latest_transcript_seq" });
    host.databaseOutage({ queries: 1, matching: "absorbed_into_active_run" });
    const ts = `${++state.messageTs}.000200`;
    const message = { type: "message", channel, channel_type: "channel", user: "U42", text: "secnod", ts, team: "T1" };
    const refused = deliver(message, "EvBusyHandOverRefused", 500);
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE conversation_id = ? AND input_summary = 'secnod'", [channel])).length > 0, 5_000, "the message recorded");
    await deliver(edit(channel, ts, "second", "1800009999.000011"));
    await refused;
    // Slack's retry of the message hands it over again: claimed, with its newest words.
    await deliver(message, "EvBusyHandOverRefused");
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    expect(pulledOf.get(channel)).toEqual(["second"]);
    expect(postsTo(channel)).toEqual(["re: hold first+second"]);
  }, 40_000);

  it("a message deleted or edited after it was answered: later runs read it recalled (nothing of it left in its transcript item or its record, found by no search, its files gone) or as edited; EventLog keeps it as said for operators", async () => {
    const channel = "CBUSY6";
    await agentFor(channel, "plain", "enqueue");
    const file = { id: "F1", name: "plan.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/plan.pdf` };
    const secret = await say(channel, "the secret plan", "message", { subtype: "file_share", files: [file] });
    await quiet(channel, 1);
    const [fileId] = filesOf.get(channel)!;
    expect(await host.r2Object(`artifacts/${fileId}`)).toEqual(new Uint8Array(FILE));
    const typo = await say(channel, "teh secret typo");
    await quiet(channel, 2);
    const recall = await deliver(deletion(channel, secret));
    await deliver(edit(channel, typo, "the typo fixed", "1800009999.000006"));
    // Sent again, and an older edit arriving late: nothing more changes.
    await deliver(deletion(channel, secret), recall);
    await deliver(edit(channel, typo, "the typo half fixed", "1800009999.000005"));
    await say(channel, "history");
    await quiet(channel, 3);
    expect(historyOf.get(channel)).toEqual({
      items: [
        { content: null, files: 0, recalled: true, edited: false },
        { content: "the typo fixed", files: 0, recalled: false, edited: true },
      ],
      found: 0,
    });
    const [item] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM transcript WHERE event_id = ?", [eventIdOf(channel, secret)]);
    expect(JSON.parse(item.metadata_json).recalled).toMatchObject({ event_id: `slack:${botId}:${recall}` });
    // Their records as runs read them (event.get, event.page) as history shows them: the recalled one holds none of
    // its words (nor its files' names), the edited one its newest; the recalled one's file is refused, as if expired.
    const recalled = { recalled: { event_id: `slack:${botId}:${recall}`, recalled_at: expect.any(String) } };
    const records = [
      { input_summary: null, metadata: recalled },
      { input_summary: "the typo fixed", metadata: { edited: { event_id: expect.stringMatching(/^slack:/), version: 1800009999.000006, edited_at: expect.any(String) } } },
    ];
    const refused = { ok: false, error: expect.objectContaining({ code: "not_found" }) };
    expect(recordsOf.get(channel)).toEqual({ got: records, paged: records, files: [refused, refused] });
    // Its bytes deleted at once, not left for their expiry.
    expect(await host.r2Object(`artifacts/${fileId}`)).toBeNull();
    // EventLog keeps both as said, and an operator reads them so, the recall marked.
    const said = await host.query<{ summary: string }>("SELECT input_summary AS summary FROM event_log WHERE event_id IN (?, ?) ORDER BY seq", [eventIdOf(channel, secret), eventIdOf(channel, typo)]);
    expect(said.map((r) => r.summary)).toEqual(["the secret plan", "teh secret typo"]);
    const shown = await host.admin("GET", `/v1/events/${encodeURIComponent(eventIdOf(channel, secret))}`);
    expect(shown.body).toMatchObject({ input_summary: "the secret plan", input: { text: "the secret plan" }, metadata: recalled });
  }, 40_000);

  it("a message shortcut's copy of a message deleted afterwards reads recalled too: later runs find nothing of its words or files", async () => {
    const channel = "CBUSY13";
    await agentFor(channel, "plain", "enqueue");
    const file = { id: "F1", name: "plan.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/plan.pdf` };
    const secret = await say(channel, "the secret plan", "message", { subtype: "file_share", files: [file] });
    await quiet(channel, 1);
    // Another user's shortcut ("Summarize") on it: its input is that message, its words and its file fetched anew.
    const message = { type: "message", subtype: "file_share", user: "U42", ts: secret, text: "the secret plan", files: [file] };
    await interact({ type: "message_action", team: { id: "T1" }, user: { id: "U7", username: "bo", team_id: "T1" }, channel: { id: channel }, callback_id: "summarize", trigger_id: "busy.sc.1", message_ts: secret, message });
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["the secret plan", "the secret plan"]);
    expect(filesOf.get(channel)).toHaveLength(2);
    // Edited, the copy reads the newest words too; then deleted.
    await deliver(edit(channel, secret, "the plan, reworded", "1800009999.000009"));
    const items = await host.query<{ content: string }>("SELECT content FROM transcript WHERE conversation_id = ? AND role = 'user' ORDER BY seq", [channel]);
    expect(items.map((i) => i.content)).toEqual(["the plan, reworded", "the plan, reworded"]);
    const recall = await deliver(deletion(channel, secret));
    await say(channel, "history");
    await quiet(channel, 3);
    const gone = { content: null, files: 0, recalled: true, edited: true };
    expect(historyOf.get(channel)).toEqual({ items: [gone, gone], found: 0 });
    const record = { input_summary: null, metadata: { recalled: { event_id: `slack:${botId}:${recall}`, recalled_at: expect.any(String) } } };
    const refused = { ok: false, error: expect.objectContaining({ code: "not_found" }) };
    expect(recordsOf.get(channel)).toEqual({ got: [record, record], paged: [record, record], files: [refused, refused, refused, refused] });
    for (const id of filesOf.get(channel)!) expect(await host.r2Object(`artifacts/${id}`)).toBeNull();
  }, 40_000);

  it("a message said while the bot was paused (recorded with its words, never run) and then deleted: runs after the pause read nothing of it in its record", async () => {
    const channel = "CBUSY7";
    await agentFor(channel, "plain", "enqueue");
    const pause = (enabled: boolean) => host.admin("PUT", `/v1/admin/bots/${botId}`, { api_base_url: fake.url, enabled });
    expect((await pause(false)).status).toBe(200);
    const file = { id: "F1", name: "paused-plan.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/plan.pdf` };
    const secret = await say(channel, "the paused secret", "message", { subtype: "file_share", files: [file] });
    expect((await pause(true)).status).toBe(200);
    const recall = await deliver(deletion(channel, secret));
    await say(channel, "history");
    await quiet(channel, 1);
    // Not even the name of the file it would have brought.
    const records = [{ input_summary: null, metadata: { recalled: { event_id: `slack:${botId}:${recall}`, recalled_at: expect.any(String) } } }];
    expect(recordsOf.get(channel)).toEqual({ got: records, paged: records, files: [] });
    const shown = await host.admin("GET", `/v1/events/${encodeURIComponent(eventIdOf(channel, secret))}`);
    expect(shown.body).toMatchObject({ disposition: "bot_disabled", input_summary: "the paused secret", metadata: { attachments_unavailable: expect.stringContaining("paused-plan.pdf") } });
  }, 40_000);
});
