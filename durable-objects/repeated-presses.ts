/**
 * A button pressed twice in quick succession (a double tap, a click that seemed not to take) is one question: every
 * platform sends each press as an event of its own (a new Telegram update, Slack trigger, Lark event, Discord
 * interaction), which EventLog's dedupe key cannot tell from a second question. Within PRESS_REPEAT_WINDOW_MS of a
 * press that got an answer under way (a run of its own, or one it was steered into), while that run still waits or
 * runs, the same person's press of the same element on the same message (for the same eyes), choosing the same, is
 * rejected as `repeated_press`, naming that run: recorded, acknowledged as the platform needs, never answered again.
 * Once that run is over (answered, cancelled, made moot), a press is a question again.
 *
 * Kept in memory: the conversation's object decides its events one at a time, so two presses racing in are told apart
 * here, and the window is far shorter than an idle object lives.
 */
import { CALLBACK_QUERY } from "../src/platforms/telegram/callback";
import { CARD_ACTION } from "../src/platforms/lark/card-action";
import { LEGACY_CARD_ACTION } from "../src/platforms/lark/legacy-card";
import { audienceOf, type RunJob } from "../src/run/job";
import type { DispatchResult, Rejection } from "./scheduling";

export const PRESS_REPEAT_WINDOW_MS = 10_000;

/** A platform's press of an element on a message (Telegram, Slack, Lark, Discord); an API event's data is its caller's own. */
const PRESSES = new Set([CALLBACK_QUERY, "block_actions", CARD_ACTION, LEGACY_CARD_ACTION, "MESSAGE_COMPONENT"]);

/** What a press names the message pressed by, per platform. */
const PRESSED_MESSAGE_KEYS = ["callback_message_id", "message_ts", "open_message_id", "message_id"] as const;

/** Dispositions that put an answer under way for the press. */
const ANSWERED = new Set<DispatchResult["disposition"]>(["started", "queued", "steered"]);

/** The press `job` is, as one string: who pressed what on which message, for whose eyes, and what it asks; null for any other event. */
function pressOf(job: RunJob): string | null {
  const data = job.event.data;
  const component = data.component;
  if (job.event.source === "api" || !PRESSES.has(job.event.source_event_type ?? "") || !component || typeof component !== "object") return null;
  const message = PRESSED_MESSAGE_KEYS.map((k) => data[k]).find((v) => v !== undefined && v !== null);
  if (message === undefined) return null;
  // The whole element as the press names it: a Slack action_id is only unique in its block, a Lark checker's press
  // differs from the last by `checked` alone, a Discord select's picks by ids whose names may repeat.
  return JSON.stringify([job.event.source_event_type, String(message), job.actor?.actor_id ?? null, audienceOf(job), component, job.input.text ?? null]);
}

export class RecentPresses {
  private readonly seen = new Map<string, { eventId: string; runId: string; at: number }>();

  /** Why `job` is not answered: the same press was, moments ago (another event than `job`'s own), its run `underWay` still. */
  repeatOf(job: RunJob, now: number, underWay: (runId: string) => boolean): Rejection | null {
    this.forget(now, underWay);
    const press = pressOf(job);
    const first = press === null ? undefined : this.seen.get(press);
    if (!first || first.eventId === job.event.event_id) return null;
    return { reason: "repeated_press", first_event_id: first.eventId, first_run_id: first.runId };
  }

  /**
   * `decided` as decided: a press that got an answer under way is the one its repeats name; decided anew (its claim
   * dropped unpulled), by the run that answers it now.
   */
  noted(job: RunJob, at: number, decided: DispatchResult): DispatchResult {
    const press = pressOf(job);
    if (press === null || decided.runId === null || !ANSWERED.has(decided.disposition)) return decided;
    const first = this.seen.get(press);
    if (!first || first.eventId === job.event.event_id) this.seen.set(press, { eventId: job.event.event_id, runId: decided.runId, at: first?.at ?? at });
    return decided;
  }

  /** Forgotten once the window is over, or its run is (answered, cancelled, made moot): a press then asks anew. */
  private forget(now: number, underWay: (runId: string) => boolean): void {
    for (const [press, first] of this.seen) if (now - first.at >= PRESS_REPEAT_WINDOW_MS || !underWay(first.runId)) this.seen.delete(press);
  }
}
