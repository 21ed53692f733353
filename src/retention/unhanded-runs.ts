import type { Db } from "../db/client";
import type { Env } from "../env";
import { runsStore } from "../stores/runs";
import type { BatchLimits } from "./limits";

/**
 * How long after ingress recorded a run its hand-over may still be under way. The hand-over is part of the
 * ingress request, which ends long before this; a run still unknown to its conversation after it never will be.
 */
export const HAND_OVER_GRACE_MS = 10 * 60_000;

/**
 * Runs ingress recorded whose hand-over to their conversation's object failed and was never retried (the
 * caller gave up after an error answer): without this they would show as waiting forever, and retention keeps
 * a run that has not ended. Each object is asked about its own runs: one it holds (waiting its turn) stays,
 * one it never received ends as failed with `host.not_handed_over`. Oldest first, at most
 * `batchSize × maxBatches` runs looked at per invocation.
 */
export async function endNeverHandedOverRuns(env: Env, db: Db, now: number, limits: BatchLimits): Promise<number> {
  let after = { createdAt: -1, runId: "" };
  let ended = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    const page = await runsStore(db).notStartedBefore(now - HAND_OVER_GRACE_MS, after, limits.batchSize);
    const byConversation = new Map<string, string[]>();
    for (const row of page) {
      const runIds = byConversation.get(row.conversationKey);
      if (runIds) runIds.push(row.runId);
      else byConversation.set(row.conversationKey, [row.runId]);
    }
    for (const [key, runIds] of byConversation) ended += await env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(key)).endNeverHandedOver(runIds);
    if (page.length < limits.batchSize) break;
    after = page[page.length - 1];
  }
  return ended;
}
