import { and, asc, desc, eq, getTableColumns, gt, lt, ne, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { budgetedPage, fieldsOf, ifWithin, rowBytes, withinBudget } from "../db/byte-budget";
import { compiled, param } from "../db/compiled";
import { insertWhere } from "../db/guarded";
import { acceptedHere } from "./event-log";
import { whileRunning } from "./while-running";
import type { Db } from "../db/client";
import { transcript } from "../db/schema";
import { encodeCursor } from "../lib/cursor";
import { iso, parseJson } from "../lib/json";
import { searchTextOf } from "./fts-query";
import { readableItem } from "./private-audience";

/** An item as read back: every column but `search_text`, which only the full-text index needs. */
const { searchText: _indexOnly, ...itemReadColumns } = getTableColumns(transcript);
export const transcriptItemColumns = itemReadColumns;
export type TranscriptRow = Omit<typeof transcript.$inferSelect, "searchText">;

/** The item_type of an assistant item holding only the refs of artifacts announced after its run's last message. */
export const ARTIFACTS_ITEM = "artifacts";

/**
 * Bytes a page of transcript items carries at most past its first (their text, parts, refs and metadata): a page
 * crosses the conversation object's RPC (32 MiB at most) and the Worker's memory, whatever runners wrote.
 */
export const TRANSCRIPT_PAGE_MAX_BYTES = 4 * 1024 * 1024;

/** The bulky columns of such a subquery's rows, null past the page's budget. */
export function bulkyWithin(read: Record<"content" | "contentJson" | "artifactRefsJson" | "metadataJson", SQL.Aliased | SQLiteColumn>, within: SQL<number>) {
  return {
    content: ifWithin<string>(within, read.content),
    contentJson: ifWithin<string>(within, read.contentJson),
    artifactRefsJson: ifWithin<string>(within, read.artifactRefsJson),
    metadataJson: ifWithin<string>(within, read.metadataJson),
  };
}

export function toTranscriptItem(row: TranscriptRow, includeArtifacts = true) {
  return {
    transcript_id: row.transcriptId,
    event_id: row.eventId,
    conversation_id: row.conversationId ?? undefined,
    thread_id: row.threadId ?? undefined,
    role: row.role,
    item_type: row.itemType,
    content: row.content ?? undefined,
    content_json: parseJson<unknown>(row.contentJson, undefined),
    artifact_refs: includeArtifacts ? parseJson<unknown[]>(row.artifactRefsJson, []) : [],
    seq: row.seq,
    cursor: encodeCursor("t", row.seq, row.conversationKey),
    created_at: iso(row.createdAt)!,
    metadata: parseJson<Record<string, unknown>>(row.metadataJson, {}),
  };
}

export interface NewTranscriptItem {
  transcriptId: string;
  conversationKey: string;
  eventId: string;
  runId?: string | null;
  conversationId?: string | null;
  threadId?: string | null;
  role: string;
  itemType: string;
  content?: string | null;
  contentJson?: unknown;
  artifactRefs?: unknown[];
  metadata?: Record<string, unknown>;
}

/** The columns of a new item, as placeholders; the next per-conversation seq is computed inside the statement. */
function itemColumns() {
  const t = transcript;
  return {
    transcriptId: param("transcriptId"),
    conversationKey: param("conversationKey"),
    seq: sql`(SELECT COALESCE(MAX(${t.seq}), 0) + 1 FROM ${t} WHERE ${t.conversationKey} = ${param("conversationKey")})`,
    eventId: param("eventId"),
    runId: param("runId"),
    conversationId: param("conversationId"),
    threadId: param("threadId"),
    role: param("role"),
    itemType: param("itemType"),
    content: param("content"),
    searchText: param("searchText"),
    contentJson: param("contentJson"),
    artifactRefsJson: param("artifactRefsJson"),
    metadataJson: param("metadataJson"),
    createdAt: param("createdAt"),
  };
}

const insertItem = compiled((db) => insertWhere(db, transcript, itemColumns()));
const insertItemIfAccepted = compiled((db) => insertWhere(db, transcript, itemColumns(), acceptedHere()));
const insertItemWhileRunning = compiled((db) => insertWhere(db, transcript, itemColumns(), whileRunning(param("runId"))));

/**
 * Insert with the next per-conversation seq computed inside the statement, so
 * concurrent writers (ingress and the run) never pick the same number: each
 * batch is one SQLite write transaction. With `acceptId`, the insert happens
 * only if that ingress attempt wrote the item's EventLog row, earlier in the
 * same batch.
 */
export function transcriptInsert(db: Db, item: NewTranscriptItem, acceptId?: string) {
  const values = itemValues(item);
  return acceptId === undefined ? insertItem(db, values) : insertItemIfAccepted(db, { ...values, acceptId });
}

/** A run's item (its `runId`), written only while the run is running (whileRunning): landing after its end, nothing. */
export function transcriptInsertWhileRunning(db: Db, item: NewTranscriptItem & { runId: string }) {
  return insertItemWhileRunning(db, itemValues(item));
}

/** An insert taking effect only if `guard` holds when it runs, as a later statement of a batch (see insertWhere). */
export function transcriptInsertWhere(db: Db, item: NewTranscriptItem, guard: SQL) {
  const t = transcript;
  const seq = sql`(SELECT COALESCE(MAX(${t.seq}), 0) + 1 FROM ${t} WHERE ${t.conversationKey} = ${item.conversationKey})`;
  return insertWhere(db, t, { ...itemValues(item), seq }, guard);
}

function itemValues(item: NewTranscriptItem) {
  return {
    transcriptId: item.transcriptId,
    conversationKey: item.conversationKey,
    eventId: item.eventId,
    runId: item.runId ?? null,
    conversationId: item.conversationId ?? null,
    threadId: item.threadId ?? null,
    role: item.role,
    itemType: item.itemType,
    content: item.content ?? null,
    searchText: searchTextOf(item.content),
    contentJson: item.contentJson === undefined ? null : JSON.stringify(item.contentJson),
    artifactRefsJson: JSON.stringify(item.artifactRefs ?? []),
    metadataJson: JSON.stringify(item.metadata ?? {}),
    createdAt: Date.now(),
  };
}

export type PageDirection = "backward" | "forward";

export function transcriptStore(db: Db) {
  return {
    /**
     * A page of items, at most `limit` and TRANSCRIPT_PAGE_MAX_BYTES (cut in the database, so what is past it never travels).
     * backward: newest first, strictly before `beforeSeq` when given;
     * forward: oldest first, strictly after `afterSeq` when given.
     * One index range scan on (conversation_key, seq) whatever the history length.
     * `artifactItems: false` leaves out the items of artifacts (item_type "artifacts"): read without their refs they
     * would be items with nothing in them. Skipped in the scan, they cost little: at most one per run.
     * `audience` (a run's: private-audience.ts) leaves out the items private to another; unset (an operator), none is.
     */
    async page(conversationKey: string, opts: { direction: PageDirection; beforeSeq?: number; afterSeq?: number; limit: number; artifactItems?: boolean; audience?: string | null }): Promise<{ rows: TranscriptRow[]; hasMore: boolean }> {
      const t = transcript;
      const conds: SQL[] = [eq(t.conversationKey, conversationKey)];
      if (opts.beforeSeq !== undefined) conds.push(lt(t.seq, opts.beforeSeq));
      if (opts.afterSeq !== undefined) conds.push(gt(t.seq, opts.afterSeq));
      if (opts.artifactItems === false) conds.push(ne(t.itemType, ARTIFACTS_ITEM));
      if (opts.audience !== undefined) conds.push(readableItem(db, t.eventId, opts.audience));
      const order = opts.direction === "backward" ? desc : asc;
      const read = db
        .select({ ...transcriptItemColumns, own: rowBytes(t.content, t.contentJson, t.artifactRefsJson, t.metadataJson).as("own") })
        .from(t)
        .where(and(...conds))
        .orderBy(order(t.seq))
        .limit(opts.limit + 1)
        .as("read");
      const within = withinBudget(read.own, sql`order by ${read.seq} ${sql.raw(opts.direction === "backward" ? "desc" : "asc")}`, TRANSCRIPT_PAGE_MAX_BYTES);
      const rows = await db
        .select({ ...fieldsOf(read, transcriptItemColumns), ...bulkyWithin(read, within), within })
        .from(read)
        .orderBy(order(read.seq))
        .all();
      // Rows within the budget have every column: the nulls are only on rows past it, which budgetedPage drops.
      return budgetedPage(rows, opts.limit) as { rows: TranscriptRow[]; hasMore: boolean };
    },
  };
}
