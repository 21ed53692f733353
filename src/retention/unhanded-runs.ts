import type { Db } from "../db/client";
import { artifactsOf } from "../artifacts/bucket";
import type { Env } from "../env";
import { loggedError } from "../lib/describe-error";
import { runsStore } from "../stores/runs";
import type { BatchLimits } from "./limits";
import { readSweepPosition, writeSweepPosition } from "./sweep-position";

/**
 * How long after ingress recorded a run its hand-over may still be under way. The hand-over is part of the
 * ingress request, which ends long before this; a run still unknown to its conversation after it never will be.
 */
export const HAND_OVER_GRACE_MS = 10 * 60_000;

/** Where the sweep keeps its place between invocations (see sweep-position.ts). */
export const UNHANDED_SWEEP_POSITION_KEY = "host/unhanded-sweep.json";

type Position = { createdAt: number; runId: string };
const START: Position = { createdAt: -1, runId: "" };

/**
 * Runs ingress recorded whose hand-over to their conversation's object failed and was never retried (the
 * caller gave up after an error answer): without this they would show as waiting forever, and retention keeps
 * a run that has not ended. Each object is asked about its own runs: one it holds (waiting its turn) stays,
 * one it never received ends as failed with `host.not_handed_over`. Oldest first, at most
 * `batchSize × maxBatches` runs looked at per invocation, from where the last invocation stopped (runs held
 * long are looked at again only once the walk has reached the end and starts over, so they never keep it
 * from a lost run behind them; so are those of a conversation whose object failed, and the invocation then fails).
 */
export async function endNeverHandedOverRuns(env: Env, db: Db, now: number, limits: BatchLimits): Promise<number> {
  // R2 away is no reason to leave lost runs waiting: without its place the walk starts over (the database is all it needs).
  const stored = await readSweepPosition(artifactsOf(env), UNHANDED_SWEEP_POSITION_KEY, positionOf).catch((err: unknown) => {
    console.warn(`never-handed-over sweep: its place was not read, walking from the start (${loggedError(err)})`);
    return null;
  });
  let after = stored ?? START;
  let ended = 0;
  const failures: unknown[] = [];
  for (let i = 0; i < limits.maxBatches; i++) {
    const page = await runsStore(db).notStartedBefore(now - HAND_OVER_GRACE_MS, after, limits.batchSize);
    const byConversation = new Map<string, string[]>();
    for (const row of page) {
      const runIds = byConversation.get(row.conversationKey);
      if (runIds) runIds.push(row.runId);
      else byConversation.set(row.conversationKey, [row.runId]);
    }
    for (const [key, runIds] of byConversation) {
      try {
        ended += await env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(key)).endNeverHandedOver(runIds);
      } catch (err) {
        // Passed over until the walk comes round again, so one conversation that keeps failing never holds up the rest.
        failures.push(err);
      }
    }
    if (page.length < limits.batchSize) {
      after = START;
      break;
    }
    after = { createdAt: page[page.length - 1].createdAt, runId: page[page.length - 1].runId };
  }
  await writeSweepPosition(artifactsOf(env), UNHANDED_SWEEP_POSITION_KEY, after === START ? null : after);
  if (failures.length) throw new AggregateError(failures, `${failures.length} conversation(s) could not be asked about their runs (${ended} ended)`);
  return ended;
}

const positionOf = (p: Record<string, unknown>): Position | null =>
  typeof p.createdAt === "number" && typeof p.runId === "string" ? { createdAt: p.createdAt, runId: p.runId } : null;
