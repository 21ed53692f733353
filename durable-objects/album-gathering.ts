import type { Config } from "../src/env";
import type { RunJob } from "../src/run/job";
import { ALBUM_MAX_PARTS, albumRunFor, joinAlbum } from "./albums";
import type { RunTableStore } from "./run-table";
import type { EventDecision, RunTable, StoredRun } from "./scheduling";

/**
 * A conversation's albums being gathered (albums.ts): items joining their album's run, and items on their way holding
 * it. An item reaches its conversation only once ingress has downloaded its files, which can take longer than
 * ALBUM_WAIT_MS (a large video, a slow link): its album's run would have begun without it, and the user would get two
 * answers to one message. So ingress announces an album's item before its download, and a run gathering the album
 * waits for the items announced as well as ALBUM_WAIT_MS after the last one that arrived. Bounded: an item holds the
 * run at most as long as its ingress may take (`albumHoldMs`), and ingress withdraws it however that ends (refused,
 * unbound), so an item lost or refused never holds the run for long. Announcements are kept in memory: an instance
 * gone meanwhile forgets them (a run they held waits its stored time, or until an item arriving times it anew).
 */

/** How long an announced item may take to arrive: each file's getFile, download and put in R2, then the event's recording. */
export const albumHoldMs = (config: Config, files: number) =>
  Math.max(1, files) * (config.PLATFORM_API_TIMEOUT_MS + config.INPUT_ATTACHMENT_FETCH_TIMEOUT_MS + config.BLOB_OP_TIMEOUT_MS) + config.DB_QUERY_TIMEOUT_MS;

export class AlbumGathering {
  /** Items announced, not arrived yet, by event id: their album, and until when they may hold its run. */
  private readonly coming = new Map<string, { albumId: string; until: number }>();

  constructor(
    private readonly runs: RunTableStore,
    private readonly config: () => Config,
    /** Whether a stored run may still take items: not executing, not being cancelled. */
    private readonly gathering: (runId: string) => boolean,
    /** In turn with the conversation's decisions: each decision sees the announcements made before it. */
    private readonly inTurn: (work: () => Promise<void>) => Promise<void>,
    /** A run's start time changed: the scheduler looks again. */
    private readonly changed: () => void,
  ) {}

  /**
   * An event reached the conversation: it is awaited no more, and an album's item joins the run of its album's first
   * (not begun yet), whatever the strategy: the user sent one message. Answers the item's decision, or null. An item
   * that did not address the bot, of an agent answering only what does, joins or starts nothing (RunJob.joinsAlbumOnly):
   * it never steers, interrupts or waits.
   */
  join(table: RunTable, job: RunJob, now: number): EventDecision | null {
    const awaited = this.coming.get(job.event.event_id);
    this.coming.delete(job.event.event_id);
    const album = albumRunFor(table, job, this.gathering);
    // Arrived: the runs it held wait for it no more. Not only the one it joins (timed anew as it is stored): another
    // gathering the album (of the agent deleted, when this item's is one created anew under its id) would wait out its
    // announcement's bound, and the runs queued behind it with it.
    if (awaited) this.retime(table.filter(([key]) => key !== album?.[0]), awaited.albumId, now);
    if (album) return joinAlbum(album, job, this.config().ALBUM_WAIT_MS, now, this.store);
    return job.joinsAlbumOnly ? { disposition: "unaddressed", runId: null } : null;
  }

  /** An item is on its way, `files` to download: runs gathering its album wait for it. One already in a run (a redelivery) is not awaited. */
  announce(albumId: string, eventId: string, files: number): Promise<void> {
    if (this.config().ALBUM_WAIT_MS === 0) return Promise.resolve(); // albums are not gathered
    return this.inTurn(async () => {
      const table = await this.runs.entries();
      if (table.some(([, r]) => r.job.event.event_id === eventId || r.job.album?.parts.some((p) => p.eventId === eventId))) return;
      const now = Date.now();
      // Held as long as they could: never coming now (their Worker went away mid-download).
      for (const [id, item] of this.coming) if (item.until <= now) this.coming.delete(id);
      this.coming.set(eventId, { albumId, until: now + albumHoldMs(this.config(), files) });
      this.retime(table, albumId, now);
    });
  }

  /** The item's ingress ended. Had it not reached the conversation (refused, unbound), its album's run waits for it no more. */
  async withdraw(eventId: string): Promise<void> {
    // Arrived, the usual case: nothing to do, and no turn to wait for.
    if (!this.coming.has(eventId)) return;
    await this.inTurn(async () => {
      const item = this.coming.get(eventId);
      if (!item) return;
      this.coming.delete(eventId);
      this.retime(await this.runs.entries(), item.albumId, Date.now());
    });
  }

  /** A run gathering an album begins once its own wait is over and no announced item of the album is on its way (past its hold, it is not awaited). */
  timed(run: StoredRun, now: number): StoredRun {
    const album = run.job.album;
    if (!album) return run;
    let notBefore = album.waitUntil ?? run.notBefore;
    // A full album takes no more items: none is awaited.
    if (album.parts.length < ALBUM_MAX_PARTS) for (const item of this.coming.values()) if (item.albumId === album.mediaGroupId && item.until > now) notBefore = Math.max(notBefore, item.until);
    return notBefore === run.notBefore ? run : { ...run, notBefore };
  }

  /** An item joined the run: stored, timed. */
  private readonly store = (key: string, run: StoredRun): void => {
    void this.runs.put(key, this.timed(run, Date.now())); // not awaited: the output gate holds the reply until the write is durable
    this.changed();
  };

  private retime(table: RunTable, albumId: string, now: number): void {
    for (const [key, run] of table) {
      if (run.state !== "queued" || run.job.album?.mediaGroupId !== albumId || !this.gathering(run.job.runId)) continue;
      const timed = this.timed(run, now);
      if (timed === run) continue;
      void this.runs.put(key, timed);
      this.changed();
    }
  }
}
