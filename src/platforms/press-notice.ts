import { BOT_DISABLED } from "./record-only";
import type { Recorded } from "./types";

/**
 * What someone who pressed a button (or used a command) is told at once when the press starts no answer: Discord's
 * private notice, Lark's toast. Null when an answer is on its way (a run started, queued, or already under way).
 */
export function pressNotice(r: Recorded | undefined): string | null {
  if (!r) return "Nothing to answer.";
  if (r.event.eventType === null) return "This interaction is not supported.";
  if (r.runId && (r.disposition === "started" || r.disposition === "queued" || r.disposition === "duplicate")) return null;
  if (r.disposition === "steered") return "Added to the answer in progress.";
  // Made moot by a newer request sent here (an interrupting agent): asking again would cancel that one's answer.
  if (r.disposition === "rejected" && r.rejection === "newer_message") return "A newer request here is answered instead of this one.";
  // The same button pressed again moments after (durable-objects/repeated-presses.ts): its first press is answered.
  if (r.disposition === "rejected" && r.rejection === "repeated_press") return "Already answering your earlier press of this button.";
  if (r.disposition === "rejected") return "Busy with an earlier request; try again shortly.";
  if (r.disposition === BOT_DISABLED) return "This app is paused; try again later.";
  return "No agent answers here.";
}
