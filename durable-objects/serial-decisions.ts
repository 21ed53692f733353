/**
 * Decisions taken one at a time, in arrival order, so each sees what the
 * previous one left (a Durable Object's input gate opens while a decision
 * awaits libSQL). A repeat of a key still being decided shares the first
 * decision instead of queueing a second.
 */
export class SerialDecisions<T> {
  private readonly pending = new Map<string, Promise<T>>();
  private tail: Promise<unknown> = Promise.resolve();

  decide(key: string, decision: () => Promise<T>): Promise<T> {
    const pending = this.pending.get(key);
    if (pending) return pending;
    const decided = this.tail.then(decision).finally(() => this.pending.delete(key));
    // A failed decision is its caller's answer; the next one still runs.
    this.tail = decided.catch(() => undefined);
    this.pending.set(key, decided);
    return decided;
  }

  /** Other work in turn with the decisions (never shared with a repeat): it sees what each decision before it left. */
  inTurn<R>(work: () => Promise<R>): Promise<R> {
    const done = this.tail.then(work);
    this.tail = done.catch(() => undefined);
    return done;
  }

  /** Resolves once the decision for `key` now pending (if any) is taken, however it ends. */
  async settled(key: string): Promise<void> {
    await this.pending.get(key)?.catch(() => undefined);
  }
}

/**
 * `work` done once per key at a time: a call while the same key's work is under way shares it instead of doing it
 * again (a lost run found by an operator's cancel and by the watchdog at once is ended, and its chat told, once).
 */
export function sharedByKey<A extends unknown[]>(keyOf: (...args: A) => string, work: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  const pending = new Map<string, Promise<void>>();
  return (...args) => {
    const key = keyOf(...args);
    const running = pending.get(key);
    if (running) return running;
    const done = work(...args).finally(() => pending.delete(key));
    pending.set(key, done);
    return done;
  };
}

/** Work done one at a time per key, in call order: each sees what the one before it left (a failure is its own caller's answer; the next still runs). */
export function inTurnByKey(): <T>(key: string, work: () => Promise<T>) => Promise<T> {
  const tails = new Map<string, Promise<unknown>>();
  return (key, work) => {
    const done = (tails.get(key) ?? Promise.resolve()).then(work);
    const tail = done.catch(() => undefined);
    tails.set(key, tail);
    void tail.then(() => tails.get(key) === tail && tails.delete(key));
    return done;
  };
}
