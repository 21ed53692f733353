import type { StoredRun } from "./scheduling";

/**
 * How a welcome run gathering Slack joins (welcomes.ts) is kept in storage: its joins (`job.joined.events`) and members
 * (`job.event.data.members`) in pages of their own beside the run's entry, which names neither. Each join rewrites the
 * run's entry and the last page of each list, not the whole of them: a burst of 1,000 joins would otherwise write
 * nearly 90 MB, up to 180 KB for each of its last joins. Pages are only appended to, a join at a time.
 */

export const PAGE_PREFIX = "welcome-page:";
/** 50 entries of each list a page: at most 20 of each for MEMBERS_LISTED, 41 keys with the run's own (storage takes 128 a call). */
const PAGE = 50;

type Lists = { events: unknown[]; members: unknown[] | undefined };
const KINDS = ["events", "members"] as const;

const pageKey = (runKey: string, kind: (typeof KINDS)[number], page: number) => `${PAGE_PREFIX}${runKey}:${kind}:${String(page).padStart(4, "0")}`;

function listsOf(run: StoredRun | undefined): Lists | undefined {
  const joined = run?.job.joined;
  if (!joined?.events.length) return undefined;
  const members = run!.job.event.data.members;
  return { events: joined.events, members: Array.isArray(members) ? members : undefined };
}

/** The page keys a stored run has beside its entry. */
export function pageKeysOf(runKey: string, run: StoredRun | undefined): string[] {
  const lists = listsOf(run);
  if (!lists) return [];
  return KINDS.flatMap((kind) => Array.from({ length: Math.ceil((lists[kind]?.length ?? 0) / PAGE) }, (_, page) => pageKey(runKey, kind, page)));
}

/**
 * What storing `run` under `runKey` writes: its entry, and the pages of its lists not already written (`written`: the
 * page keys storage holds, as `previous`, the run as last stored, has them). Null for a run without joins: its entry alone.
 */
export function pagedEntries(runKey: string, run: StoredRun, previous: StoredRun | undefined, written: ReadonlySet<string>): Record<string, unknown> | null {
  const lists = listsOf(run);
  if (!lists) return null;
  const before = listsOf(previous);
  const { members, ...data } = run.job.event.data;
  // How many entries each list has: a page written past them (none is, lists only grow) is never read back.
  const joined = { ...run.job.joined!, events: [], paged: { events: lists.events.length, members: lists.members?.length ?? 0 } };
  const entries: Record<string, unknown> = { [runKey]: { ...run, job: { ...run.job, joined, event: { ...run.job.event, data: members === undefined ? data : { ...data, members: [] } } } } };
  for (const kind of KINDS) {
    const list = lists[kind] ?? [];
    for (let page = 0; page * PAGE < list.length; page++) {
      const [key, slice, had] = [pageKey(runKey, kind, page), list.slice(page * PAGE, (page + 1) * PAGE), before?.[kind]?.slice(page * PAGE, (page + 1) * PAGE)];
      // Unchanged since it was written (the same entries: lists are copied, never their entries): not written again.
      if (written.has(key) && had?.length === slice.length && slice.every((entry, i) => entry === had[i])) continue;
      entries[key] = slice;
    }
  }
  return entries;
}

/** The key of the run a page belongs to (run keys hold colons too: the page's own two parts are the last). */
export const runKeyOfPage = (page: string) => page.slice(PAGE_PREFIX.length).split(":").slice(0, -2).join(":");

/** A run as its entry and pages were listed (`pages`: every page key listed, in key order, with its entries): its lists back in place. */
export function withPages(runKey: string, run: StoredRun, pages: ReadonlyMap<string, unknown[]>): StoredRun {
  // As stored: an entry written by pagedEntries names its lists' lengths, which RunJob does not know of.
  const joined = run.job.joined as (StoredRun["job"]["joined"] & { paged?: Record<(typeof KINDS)[number], number> }) | undefined;
  if (!joined?.paged) return run;
  const { paged, ...rest } = joined;
  const read = (kind: (typeof KINDS)[number]) => [...pages].filter(([key]) => key.startsWith(`${PAGE_PREFIX}${runKey}:${kind}:`)).flatMap(([, entries]) => entries).slice(0, paged[kind]);
  const members = Array.isArray(run.job.event.data.members) ? { members: read("members") } : {};
  return { ...run, job: { ...run.job, joined: { ...rest, events: read("events") as typeof rest.events }, event: { ...run.job.event, data: { ...run.job.event.data, ...members } } } };
}
