import { dbOf } from "../db/connect";
import { configOf, type Env } from "../env";
import { deleteExpiredArtifacts } from "./artifacts";
import { deleteOldHistory } from "./history";
import { R2_DELETE_MAX_KEYS } from "./limits";
import { deleteOrphanBlobs } from "./orphans";
import { deleteOldRuns } from "./runs";
import { endNeverHandedOverRuns } from "./unhanded-runs";

export interface RetentionSummary {
  artifacts: number;
  orphanBlobs: number;
  /** Runs ended as failed because they never reached their conversation. */
  neverHandedOver: number;
  eventLog: number;
  transcript: number;
  runs: number;
}

const DAY_MS = 24 * 3600 * 1000;

/**
 * The cron job: expired artifacts, orphaned blobs and runs never handed over always; EventLog and Transcript rows, and
 * ended runs with their ledgers, older than RETENTION_DAYS when that is set. `now` is the trigger's scheduled time.
 * Bounded per invocation; what is left is picked up by the next one.
 */
export async function runRetention(env: Env, now: number): Promise<RetentionSummary> {
  const config = configOf(env);
  const db = dbOf(env);
  const limits = { batchSize: config.RETENTION_BATCH_SIZE, maxBatches: config.RETENTION_MAX_BATCHES };
  const r2Limits = { ...limits, batchSize: Math.min(limits.batchSize, R2_DELETE_MAX_KEYS) };
  const artifacts = await deleteExpiredArtifacts(db, env.ARTIFACTS, now, r2Limits);
  const orphanBlobs = await deleteOrphanBlobs(db, env.ARTIFACTS, now, r2Limits);
  // Before old runs are deleted: a run ended here can go in the same invocation.
  const neverHandedOver = await endNeverHandedOverRuns(env, db, now, limits);
  if (config.RETENTION_DAYS === undefined) return { artifacts, orphanBlobs, neverHandedOver, eventLog: 0, transcript: 0, runs: 0 };
  const cutoff = now - config.RETENTION_DAYS * DAY_MS;
  const history = await deleteOldHistory(db, env.ARTIFACTS, cutoff, limits);
  return { artifacts, orphanBlobs, neverHandedOver, ...history, runs: await deleteOldRuns(db, cutoff, limits) };
}
