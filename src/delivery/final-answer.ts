import { isBlankMessage } from "../protocol/common";
import { parseResultPayload } from "../protocol/results";
import { STREAMED_TEXT_MAX_CHARS } from "../run/results";
import type { LedgerEntry } from "../stores/runs";

/** An entry's message as the host applied it (parsed: key order and stripped keys as the transcript saw them), as JSON. */
function appliedMessage(entry: LedgerEntry): string | null {
  const parsed = parseResultPayload(entry.type, entry.data);
  if (parsed.kind !== "ok" || (parsed.result.type !== "message.completed" && parsed.result.type !== "run.completed")) return null;
  return parsed.result.data.message ? JSON.stringify(parsed.result.data.message) : null;
}

/**
 * Which message ends a run's reply, by the rules the transcript follows (ResultProcessor): run.completed's own message
 * unless it repeats the last message.completed; with neither, the text streamed as deltas since the last message, which
 * is the run's message (a chat that does not stream is sent it whole).
 */
export class FinalAnswer {
  private lastCompleted: string | null = null;
  /** Null once past STREAMED_TEXT_MAX_CHARS, as the processor then records no message. */
  private streamed: string | null = "";
  /** The run's transcript message items so far (every message.completed the host accepted is one). */
  private items = 0;

  delta(text: string): void {
    this.streamed = this.streamed !== null && this.streamed.length + text.length <= STREAMED_TEXT_MAX_CHARS ? this.streamed + text : null;
  }

  completed(entry: LedgerEntry): void {
    this.lastCompleted = appliedMessage(entry);
    this.streamed = "";
    this.items++;
  }

  /**
   * Which of the run's transcript message items (1 on, in order) a reply shows: the one `entry` completed
   * (message.completed, or run.completed's own or streamed message), the next one for a draft still streaming (no
   * entry), null for none (a run that failed records no draft). The delivery trail names it, so a chat reply to
   * the answer reads it (platforms/delivered-reply.ts).
   */
  itemOf(entry?: LedgerEntry): number | null {
    if (entry === undefined) return this.items + 1;
    if (entry.type === "message.completed") return this.items;
    if (entry.type !== "run.completed") return null;
    const parsed = parseResultPayload(entry.type, entry.data);
    const message = parsed.kind === "ok" && parsed.result.type === "run.completed" ? parsed.result.data.message : undefined;
    const own = !!message && message.role === "assistant" && !isBlankMessage(message) && this.isNew(entry);
    return own || this.unfinished !== null ? this.items + 1 : null;
  }

  /** Whether run.completed's message is a new one to show. */
  isNew(entry: LedgerEntry): boolean {
    const message = appliedMessage(entry);
    return message !== null && message !== this.lastCompleted;
  }

  /** The streamed text that is the run's message when no message came after it, or null. */
  get unfinished(): string | null {
    return this.streamed?.trim() ? this.streamed : null;
  }
}
