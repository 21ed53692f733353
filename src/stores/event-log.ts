import { and, asc, desc, eq, getTableColumns, gt, lt, sql, type SQL } from "drizzle-orm";
import { budgetedPage, fieldsOf, ifWithin, rowBytes, withinBudget } from "../db/byte-budget";
import type { Db } from "../db/client";
import { param } from "../db/compiled";
import { eventLog } from "../db/schema";
import { encodeCursor } from "../lib/cursor";
import { newId } from "../lib/ids";
import { iso, parseJson } from "../lib/json";
import { runsStore } from "./runs";
import { readableEventRow } from "./private-audience";

export type EventRow = typeof eventLog.$inferSelect;

/**
 * SQL for compiled statements: the EventLog row of `:eventId` was written by
 * the ingress attempt `:acceptId` (earlier in the same batch), so later writes
 * of that batch happen once per event however often it is delivered.
 */
export const acceptedHere = () =>
  sql`EXISTS (SELECT 1 FROM ${eventLog} WHERE ${eventLog.eventId} = ${param("eventId")} AND ${eventLog.acceptId} = ${param("acceptId")})`;

/** The §8 AgentEventRecord view of an EventLog row. */
export function toEventRecord(row: EventRow) {
  return {
    event_id: row.eventId,
    event_type: row.eventType,
    event_time: row.eventTime ?? undefined,
    source: row.source,
    bot_id: row.botId ?? undefined,
    workspace_id: row.workspaceId ?? undefined,
    conversation_id: row.conversationId ?? undefined,
    thread_id: row.threadId ?? undefined,
    actor_type: row.actorType ?? undefined,
    actor_id: row.actorId ?? undefined,
    actor_name: row.actorName ?? undefined,
    subject_type: row.subjectType ?? undefined,
    subject_id: row.subjectId ?? undefined,
    input_summary: row.inputSummary ?? undefined,
    raw_ref: row.rawRef ?? undefined,
    seq: row.seq,
    cursor: encodeCursor("e", row.seq, row.conversationKey),
    created_at: iso(row.createdAt)!,
    metadata: parseJson<Record<string, unknown>>(row.metadataJson, {}),
  };
}

/** An EventLog row as an operator sees it: the §8 record, plus what the host decided and what the event carried. */
export function toOperatorEventView(row: EventRow) {
  return {
    ...toEventRecord(row),
    source_event_type: row.sourceEventType ?? undefined,
    disposition: row.disposition ?? undefined,
    run_id: row.runId ?? undefined,
    agent_id: row.agentId ?? undefined,
    input: parseJson<Record<string, unknown> | null>(row.inputJson ?? "", null) ?? undefined,
    data: parseJson<Record<string, unknown>>(row.dataJson, {}),
  };
}

/** Where a host record belongs: its run's conversation, named as the run's event names it. */
export interface RecordPlace {
  conversationKey?: string | null;
  conversationId?: string | null;
  threadId?: string | null;
  workspaceId?: string | null;
  botId?: string | null;
}

/** The place of a run's host records: its conversation (a chat's bot and workspace included). */
export const placeOfRun = (run: { conversationKey: string; conversation: { conversation_id?: string | null; thread_id?: string | null; workspace_id?: string | null; bot_id?: string | null } }): RecordPlace & { conversationKey: string } => ({
  conversationKey: run.conversationKey,
  conversationId: run.conversation.conversation_id ?? null,
  threadId: run.conversation.thread_id ?? null,
  workspaceId: run.conversation.workspace_id ?? null,
  botId: run.conversation.bot_id ?? null,
});

export interface HostRecord extends RecordPlace {
  eventType: string;
  runId?: string | null;
  data: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  /** A record written at most once whatever retries it: its own id, and a second insert of it changes nothing. */
  onceAs?: string;
  /** The chat message it posted or edited (a delivery's), as a reply to that message names it (../delivery/delivered-ref.ts). */
  messageRef?: string | null;
}

export function hostRecordInsert(db: Db, rec: HostRecord) {
  const insert = db.insert(eventLog).values(hostRecordValues(rec));
  return rec.onceAs ? insert.onConflictDoNothing({ target: eventLog.eventId }) : insert;
}

/** The EventLog row of a host record. */
export function hostRecordValues(rec: HostRecord) {
  return {
    eventId: rec.onceAs ?? newId("hev"),
    eventType: rec.eventType,
    source: "system",
    conversationKey: rec.conversationKey ?? null,
    conversationId: rec.conversationId ?? null,
    threadId: rec.threadId ?? null,
    workspaceId: rec.workspaceId ?? null,
    botId: rec.botId ?? null,
    runId: rec.runId ?? null,
    ...(rec.messageRef ? { messageRef: rec.messageRef } : {}),
    dataJson: JSON.stringify(rec.data),
    // AgentEventRecord exposes metadata, not data: a host record's facts go in both.
    metadataJson: JSON.stringify({ ...rec.data, ...rec.metadata }),
    createdAt: Date.now(),
  };
}

/**
 * The Durable Object's decision for an event accepted as `bound`: steered into
 * another run, or rejected. The metadata patch is merged into the row's metadata.
 */
export function eventDecisionStatement(db: Db, eventId: string, decision: { disposition: string; runId: string | null; metadata?: Record<string, unknown> }) {
  return db
    .update(eventLog)
    .set({
      disposition: decision.disposition,
      runId: decision.runId,
      metadataJson: decision.metadata ? sql`json_patch(${eventLog.metadataJson}, ${JSON.stringify(decision.metadata)})` : undefined,
    })
    .where(eq(eventLog.eventId, eventId));
}

/** An event decided without a run of its own (steered into another run, or rejected): its decision, and its own run, not started, discarded. Idempotent. */
export const decidedWithoutOwnRun = (db: Db, eventId: string, ownRunId: string, decision: Parameters<typeof eventDecisionStatement>[2]) => [
  eventDecisionStatement(db, eventId, decision),
  runsStore(db).discardQueuedStatement(ownRunId),
];

/** Bytes a page of EventLog rows carries at most past its first (inputs, data, metadata), as TRANSCRIPT_PAGE_MAX_BYTES. */
export const EVENT_PAGE_MAX_BYTES = 4 * 1024 * 1024;

export function eventLogStore(db: Db) {
  return {
    async get(eventId: string): Promise<EventRow | undefined> {
      return db.select().from(eventLog).where(eq(eventLog.eventId, eventId)).get();
    },
    /**
     * Newest first strictly before `beforeSeq`, or oldest first strictly after `afterSeq` (following new events).
     * `audience` (a run's: private-audience.ts) leaves out the rows private to another; unset (an operator), none is.
     */
    async page(conversationKey: string, bound: { beforeSeq?: number; afterSeq?: number }, limit: number, audience?: string | null): Promise<{ rows: EventRow[]; hasMore: boolean }> {
      const conds: SQL[] = [eq(eventLog.conversationKey, conversationKey)];
      if (bound.beforeSeq !== undefined) conds.push(lt(eventLog.seq, bound.beforeSeq));
      if (bound.afterSeq !== undefined) conds.push(gt(eventLog.seq, bound.afterSeq));
      if (audience !== undefined) conds.push(readableEventRow(db, eventLog, audience));
      const forward = bound.afterSeq !== undefined;
      const order = forward ? asc : desc;
      const e = eventLog;
      // Cut to EVENT_PAGE_MAX_BYTES in the database, as a transcript page is: what is past it never travels.
      const read = db
        .select({ ...getTableColumns(e), own: rowBytes(e.inputJson, e.dataJson, e.metadataJson).as("own") })
        .from(e)
        .where(and(...conds))
        .orderBy(order(e.seq))
        .limit(limit + 1)
        .as("read");
      const within = withinBudget(read.own, sql`order by ${read.seq} ${sql.raw(forward ? "asc" : "desc")}`, EVENT_PAGE_MAX_BYTES);
      const rows = await db
        .select({
          ...fieldsOf(read, getTableColumns(e)),
          inputJson: ifWithin<string>(within, read.inputJson),
          dataJson: ifWithin<string>(within, read.dataJson),
          metadataJson: ifWithin<string>(within, read.metadataJson),
          within,
        })
        .from(read)
        .orderBy(order(read.seq))
        .all();
      // Rows within the budget have every column: the nulls are only on rows past it, which budgetedPage drops.
      return budgetedPage(rows, limit) as { rows: EventRow[]; hasMore: boolean };
    },
  };
}
