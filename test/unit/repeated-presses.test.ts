import { describe, expect, it } from "vitest";
import { MAX_PRESSES, PRESS_REPEAT_WINDOW_MS, RecentPresses } from "../../durable-objects/repeated-presses";
import type { RunJob } from "../../src/run/job";
import { MemStorage } from "../support/mem-storage";

type PressOpts = { source?: string; sourceEventType?: string; actor?: string; text?: string; message?: number; component?: Record<string, unknown>; runId?: string };
const press = (eventId: string, opts: PressOpts = {}) =>
  // Only the fields a press is told by are meaningful; the rest of a job does not matter here.
  ({
    runId: opts.runId ?? `run_${eventId}`,
    event: { event_id: eventId, source: opts.source ?? "telegram", source_event_type: opts.sourceEventType ?? "callback_query", event_type: "message.received", data: { callback_message_id: opts.message ?? 7, component: opts.component ?? { custom_id: opts.text ?? "approve" } } },
    actor: { actor_type: "user", actor_id: opts.actor ?? "42", metadata: {} },
    input: { text: opts.text ?? "approve", contents: [], attachments: [] },
  }) as unknown as RunJob;

const started = (job: RunJob) => ({ disposition: "started" as const, runId: job.runId });
/** Every run still waiting or running. */
const underWay = async () => true;
// A fake of the platform's storage, not of our code: DurableObjectStorage as the object uses it.
const recentPresses = (storage = new MemStorage()) => new RecentPresses(storage as unknown as DurableObjectStorage);

describe("repeated presses", () => {
  it("rejects the same press within the window, naming the first; not once the window is over", async () => {
    const presses = recentPresses();
    const first = press("e1");
    expect(await presses.repeatOf(first, 1_000, underWay)).toBeNull();
    presses.noted(first, 1_000, started(first));
    expect(await presses.repeatOf(press("e2"), 1_000 + PRESS_REPEAT_WINDOW_MS - 1, underWay)).toEqual({ reason: "repeated_press", first_event_id: "e1", first_run_id: "run_e1" });
    // Its own redelivery is no repeat of itself.
    expect(await presses.repeatOf(first, 1_500, underWay)).toBeNull();
    expect(await presses.repeatOf(press("e3"), 1_000 + PRESS_REPEAT_WINDOW_MS, underWay)).toBeNull();
  });

  it("tells apart another button, message or person, a press that got no answer, and an API event shaped as a press", async () => {
    const presses = recentPresses();
    const first = press("e1");
    presses.noted(first, 0, started(first));
    for (const other of [press("b", { text: "reject" }), press("m", { message: 8 }), press("p", { actor: "43" }), press("api", { source: "api" }), press("cmd", { sourceEventType: "slash_command" })]) expect(await presses.repeatOf(other, 10, underWay)).toBeNull();
    const refused = recentPresses();
    refused.noted(first, 0, { disposition: "rejected", runId: null });
    expect(await refused.repeatOf(press("e2"), 10, underWay)).toBeNull();
  });

  it("takes a press as a question again once the first's run is over (answered, cancelled, made moot)", async () => {
    const presses = recentPresses();
    const first = press("e1");
    presses.noted(first, 0, started(first));
    expect(await presses.repeatOf(press("e2"), 10, async (runId) => runId !== "run_e1")).toBeNull();
    // Forgotten: its run does not come back.
    expect(await presses.repeatOf(press("e3"), 20, underWay)).toBeNull();
  });

  it("tells apart elements the same but for their block (Slack) or their checked state (a Lark checker)", async () => {
    const presses = recentPresses();
    const slack = (id: string, block: string) => press(id, { sourceEventType: "block_actions", component: { custom_id: "approve", component_type: "button", block_id: block, values: ["go"] }, text: "go" });
    const checker = (id: string, checked: boolean) => press(id, { sourceEventType: "card.action.trigger", component: { custom_id: "done", component_type: "checker", values: [], value: null, checked }, text: "done" });
    for (const [first, other] of [[slack("s1", "pr-1"), slack("s2", "pr-2")], [checker("c1", true), checker("c2", false)]]) {
      presses.noted(first, 0, started(first));
      expect(await presses.repeatOf(other, 10, underWay)).toBeNull();
    }
  });

  it("names the run that answers the first press now when it is decided anew (its claim dropped unpulled)", async () => {
    const presses = recentPresses();
    const first = press("e1", { runId: "run_target" });
    presses.noted(first, 0, { disposition: "steered", runId: "run_target" });
    // The claim dropped, the press gets a run of its own.
    presses.noted(first, 50, started(press("e1")));
    expect(await presses.repeatOf(press("e2"), 100, async (runId) => runId === "run_e1")).toEqual({ reason: "repeated_press", first_event_id: "e1", first_run_id: "run_e1" });
  });

  it("refuses a repeat decided by the object's next instance (a restart between the presses), naming the first", async () => {
    const storage = new MemStorage();
    const before = recentPresses(storage);
    const first = press("e1");
    await before.repeatOf(first, 1_000, underWay);
    before.noted(first, 1_000, started(first));
    const after = recentPresses(storage);
    expect(await after.repeatOf(press("e2"), 2_000, underWay)).toEqual({ reason: "repeated_press", first_event_id: "e1", first_run_id: "run_e1" });
    // Its run lost with the first instance (not under way here): a question again.
    expect(await recentPresses(storage).repeatOf(press("e3"), 2_000, async () => false)).toBeNull();
  });

  it("keeps a press in storage only for its window, and at most MAX_PRESSES of them", async () => {
    const storage = new MemStorage();
    const presses = recentPresses(storage);
    const first = press("e1");
    await presses.repeatOf(first, 0, underWay);
    presses.noted(first, 0, started(first));
    expect([...storage.m.keys()]).toHaveLength(1);
    await presses.repeatOf(press("later", { text: "other" }), PRESS_REPEAT_WINDOW_MS, underWay);
    expect(storage.m.size).toBe(0);
    for (let i = 0; i <= MAX_PRESSES; i++) presses.noted(press(`m${i}`, { message: 100 + i }), PRESS_REPEAT_WINDOW_MS, started(press(`m${i}`)));
    await new Promise((r) => setTimeout(r, 0));
    expect(storage.m.size).toBe(MAX_PRESSES);
    // The oldest gave way.
    expect(await recentPresses(storage).repeatOf(press("again0", { message: 100 }), PRESS_REPEAT_WINDOW_MS, underWay)).toBeNull();
    expect(await recentPresses(storage).repeatOf(press("again1", { message: 101 }), PRESS_REPEAT_WINDOW_MS, underWay)).toMatchObject({ first_event_id: "m1" });
  });

  it("forgets, in storage, a press an earlier instance kept once its run ends here, though no press is decided here", async () => {
    const storage = new MemStorage();
    const before = recentPresses(storage);
    const first = press("e1");
    await before.repeatOf(first, 0, underWay);
    before.noted(first, 0, started(first));
    expect(storage.m.size).toBe(1);
    recentPresses(storage).ended(first.runId);
    await new Promise((r) => setTimeout(r, 0));
    expect(storage.m.size).toBe(0);
  });
});
