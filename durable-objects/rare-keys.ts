/**
 * The keys under one prefix of an object's storage that are rare (an edit held for a hand-over, a claim whose write
 * went unanswered, an interrupt's mark on a run), known in memory after one list: the path every run takes asks
 * memory, not storage, whether one is there. Only this instance writes its object's storage, so the set stays true as
 * long as each write of such a key is told here (`added`, `removed`). Changes told before the first list ends apply
 * after it, in the order told.
 */
export class RareKeys {
  private loading: Promise<Set<string>> | null = null;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly prefix: string,
  ) {}

  async has(key: string): Promise<boolean> {
    return (await this.keys()).has(key);
  }

  async any(): Promise<boolean> {
    return (await this.keys()).size > 0;
  }

  /** Told right after the storage call that writes it (in the same tick). */
  added(key: string): void {
    // A list that fails is told to whoever asks next (has, any); the key written is in storage for the next list.
    void this.keys().then((keys) => keys.add(key), () => {});
  }

  removed(key: string): void {
    void this.keys().then((keys) => keys.delete(key), () => {});
  }

  private keys(): Promise<Set<string>> {
    // A list that failed is made again by the next ask, not kept failed for the instance's life.
    this.loading ??= this.storage.list({ prefix: this.prefix }).then(
      (found) => new Set(found.keys()),
      (err: unknown) => {
        this.loading = null;
        throw err;
      },
    );
    return this.loading;
  }
}
