import { CoveredRuns } from "./covered-runs";
import { REDACTED } from "./scrub";
import { START, type SecretMatcher } from "./secret-matcher";

/**
 * Scrubs text that arrives in pieces (a model's streamed deltas) as `scrub` scrubs it whole: what the pieces give out,
 * joined, is the whole text scrubbed, however it was split. What was read last and may be the start of a secret (split
 * across two pieces or more) waits for the pieces after it; nothing else does. Each piece is read once, where the last
 * left off, so the work is linear in the text, and what is held is never more than the longest secret.
 */
export class StreamScrubber {
  private node = START;
  /** Units read so far. */
  private read = 0;
  /** Everything before this unit was given out (shown, or inside a `[redacted]` given out). */
  private decided = 0;
  /** The end of the last `[redacted]` given out: a secret found touching or overlapping it is inside it (-1: none). */
  private redactedTo = -1;
  /** Stretches found that start at or after `decided`, not given out yet. */
  private readonly runs = new CoveredRuns();
  /** The text from `decided` on, as the pieces it came in (from `first`). */
  private held: string[] = [];
  private first = 0;

  constructor(private readonly matcher: SecretMatcher) {}

  /** Of the text so far, what can be given out now, scrubbed. */
  push(piece: string): string {
    if (!this.matcher.longest) return piece;
    const base = this.read;
    for (let i = 0; i < piece.length; i++) {
      this.node = this.matcher.step(this.node, piece.charCodeAt(i));
      const length = this.matcher.matchedAt(this.node);
      if (length) this.cover(base + i + 1 - length, base + i + 1);
    }
    this.read += piece.length;
    if (piece) this.held.push(piece);
    // A secret found later starts no earlier than what may still be the start of one.
    return this.giveOut(this.read - this.matcher.heldAt(this.node));
  }

  /** The rest, once nothing more will arrive (the scrubber starts again after it). */
  flush(): string {
    const rest = this.matcher.longest ? this.giveOut(this.read) : "";
    this.node = START;
    this.read = this.decided = 0;
    this.redactedTo = -1;
    this.runs.clear();
    this.held = [];
    this.first = 0;
    return rest;
  }

  private cover(start: number, end: number) {
    // Inside or touching the `[redacted]` already given out: it grows, and what was found since is inside it too.
    if (start <= this.redactedTo) {
      this.redactedTo = Math.max(this.redactedTo, end);
      this.runs.clear();
      return;
    }
    this.runs.add(start, end);
  }

  /** Gives out everything before `upTo` (and a `[redacted]` begun before it, whole). */
  private giveOut(upTo: number): string {
    const parts: string[] = [];
    // A `[redacted]` given out reaches this far: what it covers is passed over.
    if (this.redactedTo > this.decided) this.take(this.redactedTo, null);
    while (this.runs.nextStart < upTo) {
      const [start, end] = this.runs.shift();
      this.take(start, parts);
      parts.push(REDACTED);
      this.redactedTo = end;
      this.take(end, null);
    }
    if (this.decided < upTo) this.take(upTo, parts);
    return parts.length === 1 ? parts[0] : parts.join("");
  }

  /** Moves `decided` to `to`, giving out the held text passed over into `parts` (or dropping it: `null`). */
  private take(to: number, parts: string[] | null) {
    while (this.decided < to) {
      const piece = this.held[this.first];
      const upTo = Math.min(piece.length, to - this.decided);
      if (parts) parts.push(upTo === piece.length ? piece : piece.slice(0, upTo));
      this.decided += upTo;
      // A piece given out whole is let go of at once: its slot stays until the list is compacted, its text does not.
      if (upTo === piece.length) this.held[this.first++] = "";
      else this.held[this.first] = piece.slice(upTo);
    }
    // Slots of pieces given out are dropped once they are half the list.
    if (this.first > 32 && this.first * 2 > this.held.length) {
      this.held.splice(0, this.first);
      this.first = 0;
    }
  }
}
