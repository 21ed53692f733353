import { quotedSecretFragments } from "../resources/secrets";
import { scrub, scrubbedHead, type TextCut } from "../lib/scrub";
import { SecretMatcher } from "../lib/secret-matcher";
import { headOf } from "../lib/text";

/**
 * How a quote is taken from the runner's words: where they were cut short where they were read (an end that is not the
 * runner's: ../lib/scrub.ts), and at most how many characters of them are shown (only the head those need is scrubbed).
 */
export interface QuoteShape extends TextCut {
  max?: number;
}

/** Takes a runner's words out of a quote. */
export type QuoteScrub = (text: string, shape?: QuoteShape) => string;

/** Where no run's secrets are known (a caller that gives none): the runner's words as sent. */
export const quotedAsSent: QuoteScrub = (text, shape) => (shape?.max === undefined ? text : headOf(text, shape.max));

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
  /** Built when a quote is first scrubbed: most runs quote nothing (only a failing runner's words are quoted). */
  private matcher: SecretMatcher | null = null;

  constructor(token: string) {
    this.sources = [() => [token]];
  }

  /** The agent's secret config values, as opened for the request: read only once a quote is scrubbed. */
  add(values: () => readonly unknown[]): void {
    this.sources.push(values);
    this.matcher = null;
  }

  /**
   * `text` with each secret as `[redacted]`, each found where the runner's words hold it. Cut short where it was read
   * (an error body's first bytes), a tail that could be a secret's start is left out too: the rest of that secret was
   * never read to be recognised.
   */
  readonly scrub: QuoteScrub = (text, shape = {}) => {
    this.matcher ??= new SecretMatcher(quotedSecretFragments(this.sources.flatMap((values) => values().flatMap(textsOf))));
    return shape.max === undefined ? scrub(text, this.matcher, shape) : scrubbedHead(text, this.matcher, shape.max, shape);
  };
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
