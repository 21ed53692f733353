import { dbOf } from "../db/connect";
import { artifactsOf } from "../artifacts/bucket";
import { configOf, type Env } from "../env";
import { deleteExpiredArtifacts } from "./artifacts";
import { deleteDeletedOwnersData } from "./deleted-owners";
import { deleteOldEvents } from "./history";
import { deleteOldTranscript } from "./transcript";
import { R2_DELETE_MAX_KEYS } from "./limits";
import { describeError } from "../lib/describe-error";
import { backfillMessageRefs } from "./message-refs";
import { deleteOrphanBlobs } from "./orphans";
import { deleteOldRuns } from "./runs";
import { learnSlackInstallations } from "./slack-installations";
import { endNeverHandedOverRuns } from "./unhanded-runs";

export interface RetentionSummary {
  artifacts: number;
  orphanBlobs: number;
  /** Runs ended as failed because they never reached their conversation. */
  neverHandedOver: number;
  eventLog: number;
  transcript: number;
  runs: number;
  /** State rows of deleted agents and plugin storage rows of deleted runner services. */
  deletedOwners: number;
  /** Chat messages recorded before migration 0021 given their `message_ref`. */
  messageRefs: number;
  /** Slack bots given the digest of their signing secret, and those whose installation was learned ahead of their requests. */
  botDigests: number;
  slackInstallations: number;
}

const DAY_MS = 24 * 3600 * 1000;

/** Steps of one invocation that failed, each with why (describeError: no query's bound values); the others ran. */
export class RetentionStepsFailed extends Error {
  override readonly name = "RetentionStepsFailed";
  constructor(
    readonly failed: string[],
    readonly summary: RetentionSummary,
    options: { cause: AggregateError },
  ) {
    const why = failed.map((name, i) => `${name} (${describeError(options.cause.errors[i])})`);
    super(`steps failed: ${why.join(", ")}; the others ran: ${JSON.stringify(summary)}`, options);
  }
}

/**
 * The cron job: expired artifacts, orphaned blobs, runs never handed over, what deleted agents and runner services
 * left (their state, their plugin storage), the `message_ref` of chat messages recorded before migration 0021 and
 * the installations of Slack bots not known yet (a few each time) always; EventLog and Transcript rows, and ended runs with their ledgers, older than RETENTION_DAYS when that is set.
 * `now` is the trigger's scheduled time. Bounded per invocation; what is left is picked up by the next one. Each step runs whatever happened to the ones
 * before it (R2 away, one query refused), so one that keeps failing never holds the others back; the invocation then
 * fails, naming it.
 */
export async function runRetention(env: Env, now: number): Promise<RetentionSummary> {
  const config = configOf(env);
  const db = dbOf(env);
  const bucket = artifactsOf(env);
  const limits = { batchSize: config.RETENTION_BATCH_SIZE, maxBatches: config.RETENTION_MAX_BATCHES };
  const r2Limits = { ...limits, batchSize: Math.min(limits.batchSize, R2_DELETE_MAX_KEYS) };
  const summary: RetentionSummary = { artifacts: 0, orphanBlobs: 0, neverHandedOver: 0, eventLog: 0, transcript: 0, runs: 0, deletedOwners: 0, messageRefs: 0, botDigests: 0, slackInstallations: 0 };
  const failures: [string, unknown][] = [];
  const step = async (name: string, work: () => Promise<Partial<RetentionSummary>>) => {
    try {
      Object.assign(summary, await work());
    } catch (err) {
      failures.push([name, err]);
    }
  };
  await step("artifacts", async () => ({ artifacts: await deleteExpiredArtifacts(db, bucket, now, r2Limits) }));
  await step("orphan blobs", async () => ({ orphanBlobs: await deleteOrphanBlobs(db, bucket, now, r2Limits) }));
  // Before old runs are deleted: a run ended here can go in the same invocation.
  await step("never handed over", async () => ({ neverHandedOver: await endNeverHandedOverRuns(env, db, now, limits) }));
  await step("deleted owners", async () => ({ deletedOwners: await deleteDeletedOwnersData(db, limits) }));
  await step("message refs", async () => ({ messageRefs: await backfillMessageRefs(db, bucket, limits) }));
  await step("slack installations", async () => {
    const { digested, learned } = await learnSlackInstallations(db, limits.batchSize);
    return { botDigests: digested, slackInstallations: learned };
  });
  if (config.RETENTION_DAYS !== undefined) {
    const cutoff = now - config.RETENTION_DAYS * DAY_MS;
    // Apart: an EventLog walk that keeps failing (a payload R2 will not delete, a statement refused) never holds the transcript back.
    await step("event log", async () => ({ eventLog: await deleteOldEvents(db, bucket, cutoff, limits) }));
    await step("transcript", async () => ({ transcript: await deleteOldTranscript(db, bucket, cutoff, limits) }));
    await step("runs", async () => ({ runs: await deleteOldRuns(db, cutoff, limits) }));
  }
  if (failures.length) {
    throw new RetentionStepsFailed(failures.map(([name]) => name), summary, { cause: new AggregateError(failures.map(([, err]) => err)) });
  }
  return summary;
}
