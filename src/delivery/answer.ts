/**
 * What a reply shows, read from the run's results: the text of deltas and
 * messages, an answer's text and files, and the notice a run that showed
 * nothing leaves instead of silence.
 */
import { DEFAULT_FAILURE_NOTICE } from "../agents/policy";
import { asRecord } from "../platforms/http";
import type { Surface } from "../platforms/types";
import { isBlankMessage, MessageSchema } from "../protocol/common";
import type { RunJob } from "../run/job";
import type { LedgerEntry } from "../stores/runs";
import { fileIdsOf } from "./files";

/** Shown for a completed answer with nothing this surface can show (only images by URL, say). */
const NO_TEXT_NOTICE = "(The answer has no text that can be shown here.)";
/** Shown for an answer of files only, none of which could be sent. */
export const FILES_NOT_SENT_NOTICE = "(The answer's files could not be sent here.)";
/** Shown on a surface still waiting for an answer when the host cancelled the run. */
const CANCELLED_NOTICE = "(This answer was cancelled.)";

/** A draft the chat already shows, of a run that ended without its answer: it ends with `mark` (endMarkOf). */
export const withEndMark = (draft: string, mark: string): string => `${draft.trimEnd()}\n\n${mark}`;

/**
 * What a shown draft of a run that ended without its answer ends with, so a half sentence never reads as the whole
 * answer: that the host cancelled it (a newer message interrupting it, an operator), or the agent's failure notice.
 * Null for a run that completed, or for an event that asked nothing (noticeInsteadOfAnswer).
 */
export function endMarkOf(job: RunJob, surface: Surface, end: LedgerEntry): string | null {
  if (end.type !== "run.failed") return null;
  return cancelledByHost(end) ? CANCELLED_NOTICE : noticeInsteadOfAnswer(job, surface, end);
}

/** Text of a delta chunk (`{chunk: {content}}`) or a message: a string, or its text elements. */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((el) => (asRecord(el).type === "text" && typeof asRecord(el).text === "string" ? (asRecord(el).text as string) : "")).join("");
}

/**
 * What to deliver for a message result: its text and files (those announced
 * before it, `pendingFiles`, then those it names), or null when it is not an
 * assistant message with either; the pending files then wait for the next one.
 */
export function answerOf(message: unknown, pendingFiles: readonly string[]): { text: string; files: string[] } | null {
  const parsed = MessageSchema.safeParse(message);
  // What the host dropped (another role, a blank message) is no answer.
  if (!parsed.success || parsed.data.role !== "assistant" || isBlankMessage(parsed.data)) return null;
  const text = textOf(parsed.data.content);
  const files = [...new Set([...pendingFiles, ...fileIdsOf(parsed.data.content)])];
  if (!text.trim() && files.length === 0) return null;
  return { text: text.trim() ? text : "", files };
}

/**
 * What a run that ended without showing anything says, so no user waits on silence (or on Discord's "thinking…"):
 * the failure notice; for an answer without text, that it cannot be shown. A run the host cancelled (an operator,
 * a newer message), and one for an event that asked nothing, stay silent where nothing is waiting for them.
 */
export function noticeInsteadOfAnswer(job: RunJob, surface: Surface, end: LedgerEntry): string | null {
  // Nobody waits on an event that asked nothing (a join): an agent may choose to stay silent there.
  if (job.event.event_type !== "message.received" && !surface.awaitsAnswer) return null;
  if (end.type === "run.completed") return NO_TEXT_NOTICE;
  if (cancelledByHost(end)) return surface.awaitsAnswer ? CANCELLED_NOTICE : null;
  return job.agent.deliveryPolicy.failure_notice ?? DEFAULT_FAILURE_NOTICE;
}

/** A run the host cancelled (an operator, a newer message), not one its runner called cancelled. */
export function cancelledByHost(end: LedgerEntry): boolean {
  return end.type === "run.failed" && end.origin === "host" && asRecord(end.data).code === "cancelled";
}
