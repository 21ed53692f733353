import type { RunJob } from "../src/run/job";
import type { RunTable, StoredRun } from "./scheduling";
import { PAGE_PREFIX, pagedEntries, pageKeysOf, runKeyOfPage, withPages } from "./welcome-pages";

const PREFIX = "run:";

/**
 * The conversation's stored runs, kept in DO storage and mirrored in memory.
 * The mirror is loaded once per instance and changed in the same tick as
 * storage, so reads never deserialise every job again (a listing clones each
 * RunJob). A write that fails resets the instance, and with it the mirror.
 */
export class RunTableStore {
  private mirror?: Map<string, StoredRun>;
  private loading?: Promise<Map<string, StoredRun>>;
  /** Writes made before the mirror was loaded, replayed on top of the listing whatever it saw. */
  private readonly early: [string, StoredRun | undefined][] = [];
  /** The pages of welcome runs' lists storage holds (welcome-pages.ts): each join writes only those it changes. */
  private readonly pages = new Set<string>();

  /** `ended`: told of a run leaving the table (it has ended) in the tick of that write (steering-queue.ts `ending`). */
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly ended: (job: RunJob) => void = () => {},
  ) {}

  /** Stored runs in arrival order (keys sort by enqueue time). */
  async entries(): Promise<RunTable> {
    const mirror = await this.load();
    return [...mirror].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** The stored entry of a run, by its run id. */
  async find(runId: string): Promise<[string, StoredRun] | undefined> {
    for (const entry of await this.load()) if (entry[1].job.runId === runId) return entry;
    return undefined;
  }

  /** Whether a stored run is this one, or has it as an album's item or a join that joined it (its decision's write may have failed: the item's own run is the album's to discard, a join's the welcome's). */
  async holds(runId: string): Promise<boolean> {
    for (const [, r] of await this.load()) if (r.job.runId === runId || r.job.album?.parts.some((p) => p.runId === runId) || r.job.joined?.events.some((e) => e.runId === runId)) return true;
    return false;
  }

  /** `holds` without waiting, for a check made in the same tick as what depends on it; true until the mirror is loaded. */
  holdsNow(runId: string): boolean {
    return !this.mirror || [...this.mirror.values()].some((r) => r.job.runId === runId);
  }

  /** `get` without waiting, for a check made in the same tick as the write that depends on it; undefined until the mirror is loaded. */
  current(key: string): StoredRun | undefined {
    return this.mirror?.get(key);
  }

  async get(key: string): Promise<StoredRun | undefined> {
    return (await this.load()).get(key);
  }

  /** Callers may leave the promise unawaited: the output gate holds replies until the write is durable. */
  put(key: string, run: StoredRun, options?: DurableObjectPutOptions): Promise<void> {
    const paged = pagedEntries(key, run, this.mirror?.get(key), this.pages);
    if (this.mirror) this.mirror.set(key, run);
    else this.early.push([key, run]);
    if (!paged) return this.storage.put(key, run, options);
    for (const page of Object.keys(paged)) if (page !== key) this.pages.add(page);
    return this.storage.put(paged, options); // the entry and its pages in one write
  }

  /** Only an ended run leaves the table, one its caller has read (so the mirror is loaded). */
  delete(key: string, options?: DurableObjectPutOptions): Promise<boolean> {
    const run = this.mirror?.get(key);
    if (run) this.ended(run.job);
    if (this.mirror) this.mirror.delete(key);
    else this.early.push([key, undefined]);
    // In the same tick, so one write: pages left by a delete made before the mirror was loaded go at the next load.
    const pages = pageKeysOf(key, run);
    for (const page of pages) this.pages.delete(page);
    if (pages.length) void this.storage.delete(pages, options);
    return this.storage.delete(key, options);
  }

  private load(): Promise<Map<string, StoredRun>> {
    if (this.mirror) return Promise.resolve(this.mirror);
    this.loading ??= Promise.all([this.storage.list<Partial<StoredRun> & Pick<StoredRun, "job" | "state">>({ prefix: PREFIX }), this.storage.list<unknown[]>({ prefix: PAGE_PREFIX })]).then(([stored, pages]) => {
      // Entries written before start rules existed wait their turn like any enqueued run.
      const mirror = new Map<string, StoredRun>([...stored].map(([k, r]) => [k, withPages(k, { start: "after-all", notBefore: 0, ...r }, pages)]));
      // Pages of a run deleted before its instance had loaded them are no run's now.
      const orphans = [...pages.keys()].filter((page) => !stored.has(runKeyOfPage(page)));
      for (const page of pages.keys()) if (!orphans.includes(page)) this.pages.add(page);
      if (orphans.length) void this.storage.delete(orphans.slice(0, 128));
      for (const [k, r] of this.early.splice(0)) {
        if (r) mirror.set(k, r);
        else mirror.delete(k);
      }
      this.mirror = mirror;
      return mirror;
    });
    return this.loading;
  }
}
