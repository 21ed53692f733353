import { describe, expect, it } from "vitest";
import { PRESS_REPEAT_WINDOW_MS, RecentPresses } from "../../durable-objects/repeated-presses";
import type { RunJob } from "../../src/run/job";

type PressOpts = { source?: string; sourceEventType?: string; actor?: string; text?: string; message?: number };
const press = (eventId: string, opts: PressOpts = {}) =>
  // Only the fields a press is told by are meaningful; the rest of a job does not matter here.
  ({
    runId: `run_${eventId}`,
    event: { event_id: eventId, source: opts.source ?? "telegram", source_event_type: opts.sourceEventType ?? "callback_query", event_type: "message.received", data: { callback_message_id: opts.message ?? 7, component: { custom_id: opts.text ?? "approve" } } },
    actor: { actor_type: "user", actor_id: opts.actor ?? "42", metadata: {} },
    input: { text: opts.text ?? "approve", contents: [], attachments: [] },
  }) as unknown as RunJob;

const started = (job: RunJob) => ({ disposition: "started" as const, runId: job.runId });

describe("repeated presses", () => {
  it("rejects the same press within the window, naming the first; not once the window is over", () => {
    const presses = new RecentPresses();
    const first = press("e1");
    expect(presses.repeatOf(first, 1_000)).toBeNull();
    presses.noted(first, 1_000, started(first));
    expect(presses.repeatOf(press("e2"), 1_000 + PRESS_REPEAT_WINDOW_MS - 1)).toEqual({ reason: "repeated_press", first_event_id: "e1", first_run_id: "run_e1" });
    // Its own redelivery is no repeat of itself.
    expect(presses.repeatOf(first, 1_500)).toBeNull();
    expect(presses.repeatOf(press("e3"), 1_000 + PRESS_REPEAT_WINDOW_MS)).toBeNull();
  });

  it("tells apart another button, message or person, a press that got no answer, and an API event shaped as a press", () => {
    const presses = new RecentPresses();
    const first = press("e1");
    presses.noted(first, 0, started(first));
    for (const other of [press("b", { text: "reject" }), press("m", { message: 8 }), press("p", { actor: "43" }), press("api", { source: "api" }), press("cmd", { sourceEventType: "slash_command" })]) expect(presses.repeatOf(other, 10)).toBeNull();
    const refused = new RecentPresses();
    refused.noted(first, 0, { disposition: "rejected", runId: null });
    expect(refused.repeatOf(press("e2"), 10)).toBeNull();
  });
});
