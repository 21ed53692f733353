import { withEditedText, type MessageEdit } from "../src/run/edited-input";
import type { RunJob } from "../src/run/job";
import { RareKeys } from "./rare-keys";

const PREFIX = "unhanded-edit:";
/** Far longer than ingress takes from recording a run to handing it over (one database answer, one RPC). */
const KEEP_MS = 60 * 60_000;
/** Storage calls take at most 128 keys. */
const MAX_KEYS = 128;

/** The newest edit of a message made while its run's hand-over was on its way, and when it was kept. */
interface HeldEdit extends MessageEdit {
  at: number;
}

/**
 * Edits of messages whose runs only libSQL knows yet: ingress recorded the run, and its hand-over to this object is
 * still on its way (a few milliseconds, longer while the database is slow). The hand-over brings the run with the
 * newest edit's words, as an edit reaching it a moment later would. Kept in the object's storage, so a hand-over
 * reaching a fresh instance gets them too; one whose hand-over never comes (the run swept as never handed over) is
 * forgotten after an hour.
 */
export class UnhandedEdits {
  /** Which runs have an edit held: asked by every hand-over, known without a storage call. */
  private readonly held: RareKeys;

  constructor(private readonly storage: DurableObjectStorage) {
    this.held = new RareKeys(storage, PREFIX);
  }

  /** Kept for the hand-over of `runId`, unless a newer edit is kept already (edits may arrive in any order). */
  async hold(runId: string, edit: MessageEdit): Promise<void> {
    const key = `${PREFIX}${runId}`;
    const held = await this.storage.get<HeldEdit>(key);
    if (held && held.version > edit.version) return;
    const now = Date.now();
    const stale = [...(await this.storage.list<HeldEdit>({ prefix: PREFIX }))].filter(([k, e]) => k !== key && now - e.at > KEEP_MS).slice(0, MAX_KEYS);
    const written = Promise.all([this.storage.put<HeldEdit>(key, { ...edit, at: now }), stale.length ? this.storage.delete(stale.map(([k]) => k)) : undefined]);
    for (const [k] of stale) this.held.removed(k);
    this.held.added(key);
    await written;
  }

  /**
   * `decide` of the job a hand-over brings, with its message's words as edited meanwhile and that edit's version (or, the
   * job's words newer, `revision`: theirs); cheap when none was (no storage call).
   */
  async applied<T>(job: RunJob, decide: (job: RunJob, revision?: number) => Promise<T>, revision?: number): Promise<T> {
    const key = `${PREFIX}${job.runId}`;
    const held = (await this.held.has(key)) ? await this.storage.get<HeldEdit>(key) : undefined;
    if (!held) return decide(job, revision);
    const newer = held.version > (revision ?? -Infinity);
    const decided = await (newer ? decide({ ...job, input: withEditedText(job.input, held.text, held.dropped) }, held.version) : decide(job, revision));
    // Forgotten once that decision is taken (its run's entry or claim holds the words from now on); one that failed (its
    // claim refused, say) leaves the words for the hand-over sent again.
    void this.storage.delete(key);
    this.held.removed(key);
    return decided;
  }
}
