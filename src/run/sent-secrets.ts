import { secretFragments, StreamRedactor } from "../resources/secrets";

/** Takes a runner's words out of a quote: `cut` when the text was cut short where it was read (its end is not the runner's). */
export type QuoteScrub = (text: string, cut?: boolean) => string;

/** Where no run's secrets are known (a caller that gives none): the runner's words as sent. */
export const quotedAsSent: QuoteScrub = (text) => text;

/**
 * What a run's request carries that only its runner may read: the run's token and its agent's secret runner_config
 * values. A runner may quote them back (a web framework's 422 echoes the field it refused; a debug print lands in
 * the result stream), and the run's error quotes its runner's words: it is kept where others read it (EventLog's
 * run.failed, which later runs of the conversation page whatever their runner; GET /v1/runs, beside views that never
 * show a secret field's value). So the quote leaves them out.
 */
export class SentSecrets {
  private values: string[];
  /** Worked out when a quote is first scrubbed: most runs quote nothing (only a failing runner's words are quoted). */
  private fragments: string[] | null = null;

  constructor(token: string) {
    this.values = [token];
  }

  /** The agent's secret config values, as opened for the request. */
  add(values: readonly string[]): void {
    this.values = [...this.values, ...values];
    this.fragments = null;
  }

  /**
   * `text` with each secret as `[redacted]`. Cut short where it was read (an error body's first bytes), a tail that
   * could be a secret's start is left out too: the rest of that secret was never read to be recognised.
   */
  readonly scrub: QuoteScrub = (text, cut = false) => {
    this.fragments ??= secretFragments(this.values);
    const redactor = new StreamRedactor(this.fragments);
    const ready = redactor.push(text);
    return cut ? ready : ready + redactor.flush();
  };
}
