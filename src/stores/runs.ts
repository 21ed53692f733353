import { and, asc, desc, eq, gt, inArray, lt, or, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { run, runEvent } from "../db/schema";
import { encodeCursor, type TimeIdPosition } from "../lib/cursor";
import { iso, parseJson } from "../lib/json";

export type RunRow = typeof run.$inferSelect;
export type RunStatus = "queued" | "running" | "completed" | "failed" | "cancelled" | "timeout";

export function toRunView(row: RunRow) {
  return {
    run_id: row.runId,
    event_id: row.eventId,
    status: row.status as RunStatus,
    agent_id: row.agentId,
    runner_id: row.runnerId,
    conversation_id: row.conversationId ?? undefined,
    thread_id: row.threadId ?? undefined,
    finish_reason: row.finishReason ?? undefined,
    message: parseJson<unknown>(row.finalMessageJson, undefined),
    error: row.errorCode ? { code: row.errorCode, message: row.errorMessage ?? "" } : undefined,
    result_count: row.resultCount,
    created_at: iso(row.createdAt),
    started_at: iso(row.startedAt),
    ended_at: iso(row.endedAt),
  };
}

export interface LedgerEntry {
  runId: string;
  seq: number;
  type: string;
  data: unknown;
  runnerSequence?: number | null;
  origin: "runner" | "host";
  createdAt: number;
}

export function toLedgerView(e: { seq: number; type: string; dataJson: string; runnerSequence: number | null; origin: string; createdAt: number }) {
  return {
    seq: e.seq,
    cursor: encodeCursor("r", e.seq),
    type: e.type,
    data: parseJson<unknown>(e.dataJson, {}),
    sequence: e.runnerSequence ?? undefined,
    origin: e.origin,
    created_at: iso(e.createdAt),
  };
}

export interface RunOutcome {
  status: Exclude<RunStatus, "queued" | "running">;
  finishReason?: string | null;
  finalMessage?: unknown;
  errorCode?: string | null;
  errorMessage?: string | null;
  resultCount: number;
}

export function runsStore(db: Db) {
  return {
    get: (runId: string) => db.select().from(run).where(eq(run.runId, runId)).get(),

    /** queued → running; returns the run id only when this trigger took the run. */
    markRunningStatement(runId: string) {
      return db
        .update(run)
        .set({ status: "running", startedAt: Date.now() })
        .where(and(eq(run.runId, runId), eq(run.status, "queued")))
        .returning({ runId: run.runId });
    },

    /** Drop a run minted at ingress that the conversation decided not to start (steered or rejected). */
    discardQueuedStatement(runId: string) {
      return db.delete(run).where(and(eq(run.runId, runId), eq(run.status, "queued")));
    },

    /** The terminal write; only a run that has not ended yet is changed. */
    finishStatement(runId: string, outcome: RunOutcome) {
      return db
        .update(run)
        .set({
          status: outcome.status,
          finishReason: outcome.finishReason ?? null,
          finalMessageJson: outcome.finalMessage === undefined ? null : JSON.stringify(outcome.finalMessage),
          errorCode: outcome.errorCode ?? null,
          errorMessage: outcome.errorMessage ?? null,
          resultCount: outcome.resultCount,
          endedAt: Date.now(),
        })
        .where(and(eq(run.runId, runId), inArray(run.status, ["queued", "running"])));
    },

    ledgerInsert(entries: LedgerEntry[]) {
      return db.insert(runEvent).values(
        entries.map((e) => ({
          runId: e.runId,
          seq: e.seq,
          type: e.type,
          dataJson: JSON.stringify(e.data ?? {}),
          runnerSequence: e.runnerSequence ?? null,
          origin: e.origin,
          createdAt: e.createdAt,
        })),
      );
    },

    async ledger(runId: string, afterSeq: number, limit: number) {
      const rows = await db
        .select()
        .from(runEvent)
        .where(and(eq(runEvent.runId, runId), gt(runEvent.seq, afterSeq)))
        .orderBy(asc(runEvent.seq))
        .limit(limit + 1)
        .all();
      return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
    },

    /** Newest first, keyset-paged on (created_at, run_id) so a page costs the same however deep it is. */
    async list(filter: { conversationId?: string; status?: string; before?: TimeIdPosition; limit: number }) {
      const conds = [];
      if (filter.conversationId) conds.push(eq(run.conversationId, filter.conversationId));
      if (filter.status) conds.push(eq(run.status, filter.status));
      if (filter.before) {
        const b = filter.before;
        conds.push(or(lt(run.createdAt, b.time), and(eq(run.createdAt, b.time), lt(run.runId, b.id))));
      }
      const rows = await db
        .select()
        .from(run)
        .where(conds.length ? and(...conds) : sql`1`)
        .orderBy(desc(run.createdAt), desc(run.runId))
        .limit(filter.limit + 1)
        .all();
      return { rows: rows.slice(0, filter.limit), hasMore: rows.length > filter.limit };
    },
  };
}
