import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { useBusySlack, type BusySlack } from "../support/slack-busy";

/** A Slack channel busy with a run (README "A busy conversation"): a message of it deleted, or its deletion lost, before it is answered. */
const platform = useBusySlack();
const { runsOf, pulledOf, deliver, lostDeletion, say, sayHeldFirst, tsOnceRecorded, deletion, edit, eventIdOf, postsTo, steeringRecords, runOfEvent, quiet, agentFor } = platform;
let setup: BusySlack["setup"];
let host: BusySlack["host"];
beforeAll(() => void ({ setup, host } = platform));

describe("Slack: a message deleted or edited before it is answered", () => {
  it("steer: a message deleted while claimed by the busy run is never pulled; its claim is recorded dropped, as recalled, once", async () => {
    const channel = "CBUSY1";
    await agentFor(channel, "steerer", "steer");
    await sayHeldFirst(channel);
    const second = await say(channel, "second");
    await say(channel, "third");
    const recall = await deliver(deletion(channel, second));
    // Slack's retry of the same deletion changes nothing more.
    await deliver(deletion(channel, second), recall);
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    expect(pulledOf.get(channel)).toEqual(["third"]);
    expect(postsTo(channel)).toEqual(["re: hold first+third"]);
    const records = await steeringRecords(channel);
    expect(records.filter((r) => r.source_event_id === eventIdOf(channel, second))).toEqual([expect.objectContaining({ type: "steering.dropped", reason: "recalled" })]);
    expect(records.filter((r) => r.type === "steering.injected").map((r) => r.source_event_id)).toHaveLength(1);
  }, 40_000);

  it("steer: a message deleted or edited while its claim is being recorded is withdrawn, or pulled as edited, all the same", async () => {
    const channel = "CBUSY5";
    await agentFor(channel, "steerer", "steer");
    await sayHeldFirst(channel);
    // Each claim's write held back: the recall's and the edit's lookups read the messages as their own runs' still.
    host.databaseOutage({ delayMs: 1_500, matching: "absorbed_into_active_run", queries: 2 });
    let second = "";
    let third = "";
    const said = [say(channel, "second").then((ts) => (second = ts)), say(channel, "thrid").then((ts) => (third = ts))];
    const [secondTs, thirdTs] = await Promise.all([tsOnceRecorded(channel, "second"), tsOnceRecorded(channel, "thrid")]);
    await new Promise((r) => setTimeout(r, 200));
    await Promise.all([deliver(deletion(channel, secondTs)), deliver(edit(channel, thirdTs, "third", "1800009999.000004"))]);
    await Promise.all(said);
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    expect(pulledOf.get(channel)).toEqual(["third"]);
    expect(postsTo(channel)).toEqual(["re: hold first+third"]);
    const records = await steeringRecords(channel);
    expect(records.filter((r) => r.source_event_id === eventIdOf(channel, second))).toEqual([expect.objectContaining({ type: "steering.dropped", reason: "recalled" })]);
    expect(records.filter((r) => r.source_event_id === eventIdOf(channel, third)).map((r) => r.type)).toEqual(["steering.injected"]);
  }, 40_000);

  it("steer with debounce: the waiting run's own message deleted while it holds later ones of the burst: they are answered, in one reply; the deleted one never", async () => {
    const channel = "CBUSY7";
    await agentFor(channel, "steerer", "steer", { debounce_ms: 1500 });
    const first = await say(channel, "first");
    const second = await say(channel, "second");
    const third = await say(channel, "third");
    const recall = await deliver(deletion(channel, first));
    // Sent again: the run answers "second" now, and the recall changes nothing more.
    await deliver(deletion(channel, first), recall);
    await quiet(channel, 1);
    expect({ runs: runsOf.get(channel), pulled: pulledOf.get(channel) }).toEqual({ runs: ["second"], pulled: ["third"] });
    expect(postsTo(channel)).toEqual(["re: second+third"]);
    expect((await runOfEvent(eventIdOf(channel, first))).status).toBe("completed");
    const records = await steeringRecords(channel);
    expect(records.map((r) => [r.type, r.source_event_id])).toEqual([
      ["steering.injected", eventIdOf(channel, second)],
      ["steering.injected", eventIdOf(channel, third)],
    ]);
  }, 40_000);

  it("steer: of the messages a busy run ended without pulling, the one edited is answered in a turn of its own as edited; the deleted one stays unanswered", async () => {
    const channel = "CBUSY11";
    await agentFor(channel, "steerer", "steer", {}, "never");
    await sayHeldFirst(channel);
    const second = await say(channel, "second");
    const third = await say(channel, "thrid");
    await deliver(deletion(channel, second));
    await deliver(edit(channel, third, "third", "1800009999.000007"));
    setup.gate(channel).resolve();
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "third"]);
    expect(postsTo(channel)).toEqual(["re: hold first", "re: third"]);
    const records = await steeringRecords(channel);
    expect(records.map((r) => [r.type, r.source_event_id, r.reason])).toEqual([
      ["steering.dropped", eventIdOf(channel, second), "recalled"],
      ["steering.dropped", eventIdOf(channel, third), undefined],
    ]);
  }, 40_000);

  it("steer: a message deleted or edited after the busy run dropped it, before it is decided anew, stays unanswered or is answered as edited", async () => {
    const channel = "CBUSY12";
    await agentFor(channel, "steerer", "steer", {}, "never");
    await sayHeldFirst(channel);
    const second = await say(channel, "second");
    const third = await say(channel, "thrid");
    // Taking the first claim back (its event bound to its own run again) is held in the database; the user deletes one and edits the other meanwhile.
    host.databaseOutage({ delayMs: 2_000, matching: "'$.steering')" });
    setup.gate(channel).resolve();
    await waitFor(async () => (await steeringRecords(channel)).length === 2, 10_000, "the drops recorded");
    await deliver(deletion(channel, second));
    await deliver(edit(channel, third, "third", "1800009999.000010"));
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "third"]);
    expect(postsTo(channel)).toEqual(["re: hold first", "re: third"]);
  }, 40_000);

  it("steer: a message edited while claimed, dropped by the busy run and decided anew, keeps its newest words when an older edit arrives late", async () => {
    const channel = "CBUSY16";
    // Debounced: the run a dropped message is decided anew into waits a moment before it starts, as a new message's would.
    await agentFor(channel, "steerer", "steer", { debounce_ms: 1500 }, "never");
    await sayHeldFirst(channel);
    const typo = await say(channel, "secnod");
    await deliver(edit(channel, typo, "second, fixed", "1800009999.000014"));
    setup.gate(channel).resolve();
    // Decided anew into a run of its own (waiting out its debounce): then Slack's late delivery of an older edit comes.
    await waitFor(async () => (await host.query<{ disposition: string }>("SELECT disposition FROM event_log WHERE event_id = ?", [eventIdOf(channel, typo)]))[0]?.disposition === "bound", 10_000, "decided anew");
    await deliver(edit(channel, typo, "second, half fixed", "1800009999.000013"));
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "second, fixed"]);
  }, 40_000);

  it("a deletion that never reached the conversation (its lookup failed: Slack sends it again later) still withdraws the message its run would start with: cancelled, or a message it claimed answered instead", async () => {
    // Enqueue: the deleted message's run waits its turn behind a busy one, which ends before Slack's retry comes.
    const queued = "CBUSY17";
    await agentFor(queued, "plain", "enqueue");
    await sayHeldFirst(queued);
    const second = await say(queued, "second");
    const recall = await lostDeletion(queued, second);
    setup.gate(queued).resolve();
    await quiet(queued, 1);
    await deliver(deletion(queued, second), recall);
    expect(runsOf.get(queued)).toEqual(["hold first"]);
    expect(await runOfEvent(eventIdOf(queued, second))).toEqual({ status: "cancelled", error_code: "cancelled", error_message: "its message was recalled before it was answered" });
    expect(postsTo(queued)).toEqual(["re: hold first"]);

    // Steer with debounce: the waiting run's own message deleted while it holds later ones; its debounce ends first.
    const burst = "CBUSY18";
    await agentFor(burst, "steerer", "steer", { debounce_ms: 1500 });
    const first = await say(burst, "first");
    await say(burst, "second");
    await say(burst, "third");
    await lostDeletion(burst, first);
    await quiet(burst, 1);
    expect({ runs: runsOf.get(burst), pulled: pulledOf.get(burst) }).toEqual({ runs: ["second"], pulled: ["third"] });
    expect(postsTo(burst)).toEqual(["re: second+third"]);
  }, 40_000);

  it("steer: a claimed message whose deletion never reached the conversation (its lookup failed: Slack sends it again later) is not pulled by the busy run: recorded dropped, as recalled", async () => {
    const channel = "CBUSY21";
    await agentFor(channel, "steerer", "steer");
    await sayHeldFirst(channel);
    const second = await say(channel, "second");
    await say(channel, "third");
    const recall = await lostDeletion(channel, second);
    // The run pulls before Slack's retry comes.
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    await deliver(deletion(channel, second), recall);
    expect(pulledOf.get(channel)).toEqual(["third"]);
    expect(postsTo(channel)).toEqual(["re: hold first+third"]);
    const records = await steeringRecords(channel);
    expect(records.map((r) => [r.type, r.source_event_id, r.reason])).toEqual([
      ["steering.dropped", eventIdOf(channel, second), "recalled"],
      ["steering.injected", expect.stringMatching(/^slack:/), undefined],
    ]);
  }, 40_000);

  it.each([
    { pull: "one", said: ["third"] },
    { pull: "two", said: ["third", "fourth"] },
  ])("steer: a pull ($pull) whose item is found recalled (its deletion never reached the conversation) answers as many of the next queued items as it asked for, not fewer", async ({ pull, said }) => {
    const channel = `CBUSY22-${pull}`;
    await agentFor(channel, "steerer", "steer", {}, pull);
    await sayHeldFirst(channel);
    const second = await say(channel, "second");
    for (const text of said) await say(channel, text);
    const recall = await lostDeletion(channel, second);
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    await deliver(deletion(channel, second), recall);
    expect(pulledOf.get(channel)).toEqual(said);
    expect(postsTo(channel)).toEqual([`re: ${["hold first", ...said].join("+")}`]);
    expect((await steeringRecords(channel)).map((r) => [r.type, r.reason])).toEqual([
      ["steering.dropped", "recalled"],
      ...said.map(() => ["steering.injected", undefined]),
    ]);
  }, 40_000);

  it("steer: a claimed message whose deletion never reached the conversation, left unpulled as the busy run ends: recorded dropped, as recalled, and not answered; the next one is", async () => {
    const channel = "CBUSY23";
    await agentFor(channel, "steerer", "steer", {}, "never");
    await sayHeldFirst(channel);
    const second = await say(channel, "second");
    const third = await say(channel, "third");
    const recall = await lostDeletion(channel, second);
    // The run ends without pulling before Slack's retry comes.
    setup.gate(channel).resolve();
    await waitFor(() => postsTo(channel).length === 2, 20_000, "both replies");
    await quiet(channel, 2);
    await deliver(deletion(channel, second), recall);
    expect(runsOf.get(channel)).toEqual(["hold first", "third"]);
    expect(postsTo(channel)).toEqual(["re: hold first", "re: third"]);
    expect((await steeringRecords(channel)).map((r) => [r.type, r.source_event_id, r.reason])).toEqual([
      ["steering.dropped", eventIdOf(channel, second), "recalled"],
      ["steering.dropped", eventIdOf(channel, third), undefined],
    ]);
  }, 40_000);

  it("steer with debounce: the waiting run's own message and the first it claimed both deleted, neither deletion reaching the conversation: the next claimed one is answered, the deleted claim recorded dropped, as recalled, not injected", async () => {
    const channel = "CBUSY-R7";
    await agentFor(channel, "steerer", "steer", { debounce_ms: 3000 });
    const first = await say(channel, "first");
    const second = await say(channel, "second");
    await say(channel, "third");
    // Each deletion is recorded (its marks written), then its look-up of the waiting message fails: its webhook fails.
    for (const ts of [first, second]) {
      await lostDeletion(channel, ts);
    }
    await quiet(channel, 1);
    expect({ runs: runsOf.get(channel), pulled: pulledOf.get(channel) ?? [] }).toEqual({ runs: ["third"], pulled: [] });
    expect(postsTo(channel)).toEqual(["re: third"]);
    expect((await steeringRecords(channel)).map((r) => [r.type, r.source_event_id, r.reason])).toEqual([
      ["steering.dropped", eventIdOf(channel, second), "recalled"],
      ["steering.injected", expect.stringMatching(/^slack:/), undefined],
    ]);
  }, 40_000);

  it("a deletion a run's start finds, its cancel's write refused once: the run is started again after a pause and ends cancelled, with no failure notice", async () => {
    const channel = "CBUSY20";
    await agentFor(channel, "plain", "enqueue");
    await sayHeldFirst(channel);
    const second = await say(channel, "second");
    await lostDeletion(channel, second);
    // The start's cancel (its error message among the write's arguments) is refused the first time.
    host.databaseOutage({ queries: 1, matching: "its message was recalled before it was answered" });
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    expect(runsOf.get(channel)).toEqual(["hold first"]);
    expect(await runOfEvent(eventIdOf(channel, second))).toEqual({ status: "cancelled", error_code: "cancelled", error_message: "its message was recalled before it was answered" });
    expect(postsTo(channel)).toEqual(["re: hold first"]);
  }, 40_000);
});
