import { inArray } from "drizzle-orm";
import type { Db } from "../db/client";
import { artifact, eventLog } from "../db/schema";
import type { BatchLimits } from "./limits";
import { readSweepPosition, writeSweepPosition } from "./sweep-position";

const DAY_MS = 24 * 3600 * 1000;

/**
 * How old an unnamed blob must be before it counts as orphaned. Every writer
 * puts its blob first and names it in the database seconds later; a platform
 * may redeliver an event (and name its stored payload) hours later. A week is
 * far past both.
 */
export const ORPHAN_GRACE_MS = 7 * DAY_MS;

/** Where the sweep keeps its place between invocations; outside the swept prefixes. */
export const ORPHAN_SWEEP_CURSOR_KEY = "host/orphan-sweep.json";

const RAW = "raw/";
const ARTIFACTS = "artifacts/";

/**
 * Blobs no row names: a platform payload whose event was never recorded, an
 * artifact whose row's write failed without an answer (kept then, since it
 * may have been committed). Both would otherwise stay forever. The bucket is
 * walked in key order, `batchSize` keys per page (at most R2_DELETE_MAX_KEYS) and at most `maxBatches`
 * pages per invocation, from where the last invocation stopped; at the end
 * it starts over. A blob is deleted only when it is older than the grace
 * period and no row names it when checked.
 */
export async function deleteOrphanBlobs(db: Db, bucket: R2Bucket, now: number, limits: BatchLimits): Promise<number> {
  let after = (await readSweepPosition(bucket, ORPHAN_SWEEP_CURSOR_KEY, (p) => (typeof p.after === "string" ? p.after : null))) ?? "";
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    const page = await bucket.list({ startAfter: after || undefined, limit: limits.batchSize });
    const old = page.objects.filter((o) => o.uploaded.getTime() < now - ORPHAN_GRACE_MS).map((o) => o.key);
    const orphans = await unnamed(db, old);
    if (orphans.length) await bucket.delete(orphans);
    deleted += orphans.length;
    // Not truncated: the walk reached the end, and the next one starts over.
    after = page.truncated && page.objects.length ? page.objects[page.objects.length - 1].key : "";
    if (!after) break;
  }
  await writeSweepPosition(bucket, ORPHAN_SWEEP_CURSOR_KEY, { after });
  return deleted;
}

/** The keys among `keys` that name a swept blob kind and that no row names. */
async function unnamed(db: Db, keys: string[]): Promise<string[]> {
  const raw = keys.filter((k) => k.startsWith(RAW));
  // Artifact blobs live at `artifacts/{artifact_id}` (artifacts/policy.ts), so the row is found by its primary key.
  const ids = keys.filter((k) => k.startsWith(ARTIFACTS)).map((k) => k.slice(ARTIFACTS.length));
  const named = new Set<string>();
  if (raw.length) {
    for (const r of await db.selectDistinct({ ref: eventLog.rawRef }).from(eventLog).where(inArray(eventLog.rawRef, raw)).all()) if (r.ref) named.add(r.ref);
  }
  if (ids.length) {
    for (const r of await db.select({ key: artifact.r2Key }).from(artifact).where(inArray(artifact.artifactId, ids)).all()) named.add(r.key);
  }
  return [...raw, ...ids.map((id) => ARTIFACTS + id)].filter((k) => !named.has(k));
}
