import { quotedSecretFragments, REDACTED } from "../resources/secrets";

/** Takes a runner's words out of a quote: `cut` when the text was cut short where it was read (its end is not the runner's). */
export type QuoteScrub = (text: string, cut?: boolean) => string;

/** Where no run's secrets are known (a caller that gives none): the runner's words as sent. */
export const quotedAsSent: QuoteScrub = (text) => text;

/**
 * What a run's request carries that only its runner may read: the run's token and its agent's secret runner_config
 * values. A runner may quote them back (a web framework's 422 echoes the field it refused; a debug print lands in
 * the result stream; an exception's text names the URL it called), and the run's error quotes its runner's words: it
 * is kept where others read it (EventLog's run.failed and runner.result_dropped, which later runs of the conversation
 * page whatever their runner; GET /v1/runs, beside views that never show a secret field's value). So the quote leaves
 * them out.
 */
export class SentSecrets {
  private readonly sources: (() => readonly unknown[])[];
  /** Worked out when a quote is first scrubbed: most runs quote nothing (only a failing runner's words are quoted). */
  private fragments: string[] | null = null;

  constructor(token: string) {
    this.sources = [() => [token]];
  }

  /** The agent's secret config values, as opened for the request: read only once a quote is scrubbed. */
  add(values: () => readonly unknown[]): void {
    this.sources.push(values);
    this.fragments = null;
  }

  /**
   * `text` with each secret as `[redacted]`. Cut short where it was read (an error body's first bytes), a tail that
   * could be a secret's start is left out too: the rest of that secret was never read to be recognised.
   */
  readonly scrub: QuoteScrub = (text, cut = false) => {
    this.fragments ??= quotedSecretFragments(this.sources.flatMap((values) => values().flatMap(textsOf)));
    return redactQuote(text, this.fragments, cut);
  };
}

/**
 * `text` with every stretch that fragments cover, as the runner sent it, replaced by one `[redacted]` (overlapping or
 * touching matches as one). Found in the text as sent, never in what a replacement put there: a short secret ("ct",
 * "e") would otherwise take apart the `[redacted]` of a longer one, the text growing with each such secret, and one
 * inside the cut head of a longer one would hide that head from the tail check. `cut`: the longest tail that could
 * start a fragment is left out (looked for before anything is replaced, for the same reason). Linear in `text` but for
 * that tail check, which a cut quote (at most 512 bytes) bounds.
 */
function redactQuote(text: string, fragments: readonly string[], cut: boolean): string {
  const kept = text.length - (cut ? fragmentStartAtEnd(text, fragments) : 0);
  // How many matches start (+1) and end (-1) at each index; allocated only once one is found.
  let depthChange: Int32Array | null = null;
  for (const f of fragments) {
    for (let at = text.indexOf(f); at >= 0 && at < kept; at = text.indexOf(f, at + 1)) {
      depthChange ??= new Int32Array(text.length + 1);
      depthChange[at]++;
      depthChange[at + f.length]--;
    }
  }
  if (!depthChange) return kept === text.length ? text : text.slice(0, kept);
  const parts: string[] = [];
  let depth = 0;
  let shownFrom = 0;
  for (let i = 0; i < kept; i++) {
    const before = depth;
    depth += depthChange[i];
    if (before === 0 && depth > 0) parts.push(text.slice(shownFrom, i), REDACTED);
    else if (before > 0 && depth === 0) shownFrom = i;
  }
  if (depth === 0) parts.push(text.slice(shownFrom, kept));
  return parts.join("");
}

/** The length of the longest tail of `text` that is a proper prefix of a fragment (0 when none). */
function fragmentStartAtEnd(text: string, fragments: readonly string[]): number {
  let longest = 0;
  for (const f of fragments) {
    for (let k = Math.min(f.length - 1, text.length); k > longest; k--) {
      if (text.endsWith(f.slice(0, k))) {
        longest = k;
        break;
      }
    }
  }
  return longest;
}

/**
 * A secret value as a runner may quote it: text as it is, a number as JSON writes it (a field stored before its
 * runner called it secret may hold one; a 422 echoes it as sent), and those a list or an object holds (its keys are
 * names, not secrets). An agent's runner_config is nested at most MAX_JSON_DEPTH levels (policy.ts), so this stays shallow.
 */
function textsOf(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (typeof value === "number") return Number.isFinite(value) ? [JSON.stringify(value)] : [];
  if (value !== null && typeof value === "object") return Object.values(value).flatMap(textsOf);
  return [];
}
