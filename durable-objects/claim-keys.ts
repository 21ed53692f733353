import { prefixOf } from "./steering-storage";

/**
 * The keys of claims made in one object's steering queues: time first, for claim order across instances; a counter
 * breaks ties within one. Never before a run's last claim (queued, or being taken under `takingPrefix`), should the
 * clock step back (or an earlier instance's clock have been ahead), as the run table's arrival keys.
 */
export class ClaimKeys {
  private claims = 0;
  /** The time of this instance's last claim key. */
  private lastAt = 0;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly takingPrefix: string,
  ) {}

  /** The key of a claim into `runId`'s queue made now. */
  async next(runId: string): Promise<string> {
    const prefix = prefixOf(runId);
    const latest = async (p: string) => [...(await this.storage.list({ prefix: p, reverse: true, limit: 1 })).keys()][0]?.slice(p.length - prefix.length);
    const last = [await latest(prefix), await latest(`${this.takingPrefix}${prefix}`)].filter((k) => k !== undefined).sort().at(-1);
    this.lastAt = Math.max(Date.now(), this.lastAt);
    const keyAt = () => `${prefix}${String(this.lastAt).padStart(15, "0")}:${String(this.claims++).padStart(6, "0")}`;
    const key = keyAt();
    if (last === undefined || key > last) return key;
    this.lastAt = Number(last.slice(prefix.length, prefix.length + 15)) + 1;
    return keyAt();
  }
}
