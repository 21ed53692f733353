/**
 * A button pressed twice in quick succession (a double tap, a click that seemed not to take) is one question: every
 * platform sends each press as an event of its own (a new Telegram update, Slack trigger, Lark event, Discord
 * interaction), which EventLog's dedupe key cannot tell from a second question. Within PRESS_REPEAT_WINDOW_MS of a
 * press that got an answer under way (a run of its own, or one it was steered into), while that run still waits or
 * runs, the same person's press of the same element on the same message (for the same eyes), choosing the same, is
 * rejected as `repeated_press`, naming that run: recorded, acknowledged as the platform needs, never answered again.
 * Once that run is over (answered, cancelled, made moot, lost with an earlier instance), a press is a question again.
 *
 * Decided in memory (the conversation's object decides its events one at a time, so two presses racing in are told
 * apart here), and kept in the object's storage too: a press repeated just after a restart (a deploy, an evicted
 * object) whose first press's run still waits is refused all the same. Storage holds a press until its run leaves
 * the table (in whichever instance) or a later press finds its window over, at most MAX_PRESSES of them, read once per
 * instance, when its first press is decided or its first run leaves the table.
 */
import { CALLBACK_QUERY } from "../src/platforms/telegram/callback";
import { CARD_ACTION } from "../src/platforms/lark/card-action";
import { LEGACY_CARD_ACTION } from "../src/platforms/lark/legacy-card";
import { audienceOf, type RunJob } from "../src/run/job";
import { loggedError } from "../src/lib/describe-error";
import type { DispatchResult, Rejection } from "./scheduling";

export const PRESS_REPEAT_WINDOW_MS = 10_000;
/** Presses kept at once (the oldest forgotten first); storage calls take at most 128 keys. */
export const MAX_PRESSES = 128;
const PREFIX = "press:";

/** A platform's press of an element on a message (Telegram, Slack, Lark, Discord); an API event's data is its caller's own. */
const PRESSES = new Set([CALLBACK_QUERY, "block_actions", CARD_ACTION, LEGACY_CARD_ACTION, "MESSAGE_COMPONENT"]);

/** What a press names the message pressed by, per platform. */
const PRESSED_MESSAGE_KEYS = ["callback_message_id", "message_ts", "open_message_id", "message_id"] as const;

/** Dispositions that put an answer under way for the press. */
const ANSWERED = new Set<DispatchResult["disposition"]>(["started", "queued", "steered"]);

/** The press that got an answer, and when; stored under its event id (PREFIX), with the press it is. */
interface FirstPress {
  eventId: string;
  runId: string;
  at: number;
}
interface StoredPress extends FirstPress {
  press: string;
}

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
  private readonly seen = new Map<string, FirstPress>();
  private restoring: Promise<void> | null = null;
  /** Whether `seen` holds what storage does (those an earlier instance kept read). */
  private restoredYet = false;

  constructor(private readonly storage: DurableObjectStorage) {}

  /**
   * Why `job` is not answered: the same press was, moments ago (another event than `job`'s own), its run `underWay`
   * still. Costs no storage call for any other event than a press.
   */
  async repeatOf(job: RunJob, now: number, underWay: (runId: string) => Promise<boolean>): Promise<Rejection | null> {
    const press = pressOf(job);
    if (press === null) return null;
    await this.restored();
    await this.forget(now, underWay);
    const first = this.seen.get(press);
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
    if (first && first.eventId !== job.event.event_id) return decided;
    const noted: FirstPress = { eventId: job.event.event_id, runId: decided.runId, at: first?.at ?? at };
    this.seen.set(press, noted);
    // Not awaited: the output gate holds the answer until the write is durable.
    void this.storage.put<StoredPress>(PREFIX + noted.eventId, { ...noted, press });
    const over = [...this.seen].slice(0, Math.max(0, this.seen.size - MAX_PRESSES));
    this.dropped(over);
    return decided;
  }

  /**
   * The run `runId` left the table (it has ended): the presses it answered go, in memory and storage, so a conversation
   * whose runs have ended keeps none, though no press comes again. Those an earlier instance kept are read first (once).
   */
  ended(runId: string): void {
    if (!this.restoredYet) {
      // Unreadable now: left in storage until the next press decided here finds its run gone.
      void this.restored().then(
        () => this.ended(runId),
        (err: unknown) => console.error(`presses answered by run ${runId} not forgotten yet: ${loggedError(err)}`),
      );
      return;
    }
    this.dropped([...this.seen].filter(([, first]) => first.runId === runId));
  }

  /** Those an earlier instance kept: read once, before the first press this instance decides or its first run ends. */
  private restored(): Promise<void> {
    this.restoring ??= this.storage.list<StoredPress>({ prefix: PREFIX }).then(
      (stored) => {
        // Noted by this instance meanwhile (none: decisions wait for this) would be newer; kept over the stored.
        for (const { press, ...first } of stored.values()) if (!this.seen.has(press)) this.seen.set(press, first);
        this.restoredYet = true;
      },
      (err: unknown) => {
        // Read again by the next press, not kept failed for the instance's life.
        this.restoring = null;
        throw err;
      },
    );
    return this.restoring;
  }

  /** Forgotten once the window is over, or its run is (answered, cancelled, made moot, lost): a press then asks anew. */
  private async forget(now: number, underWay: (runId: string) => Promise<boolean>): Promise<void> {
    const over: [string, FirstPress][] = [];
    for (const entry of this.seen) if (now - entry[1].at >= PRESS_REPEAT_WINDOW_MS || !(await underWay(entry[1].runId))) over.push(entry);
    this.dropped(over);
  }

  private dropped(over: [string, FirstPress][]): void {
    if (over.length === 0) return;
    for (const [press] of over) this.seen.delete(press);
    void this.storage.delete(over.map(([, first]) => PREFIX + first.eventId));
  }
}
