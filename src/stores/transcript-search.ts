import { and, asc, desc, eq, exists, inArray, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { transcriptFts } from "../db/fts";
import { eventLog, transcript } from "../db/schema";
import { fieldsOf, rowBytes, withinBudget } from "../db/byte-budget";
import { bulkyWithin, TRANSCRIPT_PAGE_MAX_BYTES, transcriptItemColumns, type TranscriptRow } from "./transcript";
import { readableItem } from "./private-audience";

export interface TranscriptSearchQuery {
  /** An FTS5 MATCH expression, from ftsMatchExpression: never raw user text. */
  match: string;
  roles?: readonly string[];
  /** Types of the EventLog event each item belongs to. */
  eventTypes?: readonly string[];
  limit: number;
  /** The searching run's audience (private-audience.ts): items private to another are never found. Unset: no item is left out. */
  audience?: string | null;
}

export interface TranscriptSearchHit {
  row: TranscriptRow;
  /** Higher is better (BM25, sign flipped so it reads like other scores). */
  score: number;
}

export function transcriptSearchStore(db: Db) {
  return {
    /**
     * Best matches of one conversation, best first, and how many items match
     * in all. The index is asked for the conversation's rows only; the key is
     * still checked on each transcript row, so whatever the index returns,
     * nothing of another conversation comes back.
     */
    async search(conversationKey: string, q: TranscriptSearchQuery): Promise<{ hits: TranscriptSearchHit[]; total: number }> {
      const t = transcript;
      const f = transcriptFts;
      // The conversation's scope token is built by the same SQL expression the
      // migration's triggers index, so the two can never disagree.
      const scoped = sql`'scope:"k' || hex(${conversationKey}) || '" AND content:(' || ${q.match} || ')'`;
      const conds: SQL[] = [sql`${f.match} MATCH ${scoped}`, sql`${t}.rowid = ${f.rowid}`, eq(t.conversationKey, conversationKey)];
      if (q.roles?.length) conds.push(inArray(t.role, [...q.roles]));
      if (q.eventTypes?.length) {
        const ofType = db
          .select({ one: sql`1` })
          .from(eventLog)
          .where(and(eq(eventLog.eventId, t.eventId), inArray(eventLog.eventType, [...q.eventTypes])));
        conds.push(exists(ofType));
      }
      if (q.audience !== undefined) conds.push(readableItem(db, t.eventId, q.audience));
      const read = db
        .select({
          ...transcriptItemColumns,
          own: rowBytes(t.content, t.contentJson, t.artifactRefsJson, t.metadataJson).as("own"),
          rank: sql<number>`${f.rank}`.as("rank"),
          // Counted over every match before LIMIT applies: one statement, no second scan.
          total: sql<number>`count(*) OVER ()`.as("total"),
        })
        // CROSS JOIN fixes the loop order: the index yields the candidates and each
        // is looked up by rowid. Left to itself, SQLite may walk the conversation
        // and probe the index once per item, which grows with history length.
        .from(f)
        .crossJoin(t)
        .where(and(...conds))
        .orderBy(asc(f.rank), desc(t.seq))
        .limit(q.limit)
        .as("read");
      // Best first, cut to a page's byte budget in the database, as history.page is (`total` still counts every match).
      const within = withinBudget(read.own, sql`order by ${read.rank} asc, ${read.seq} desc`, TRANSCRIPT_PAGE_MAX_BYTES);
      const rows = await db
        .select({ row: { ...fieldsOf(read, transcriptItemColumns), ...bulkyWithin(read, within) }, rank: read.rank, total: read.total, within })
        .from(read)
        .orderBy(asc(read.rank), desc(read.seq))
        .all();
      const hits = rows.filter((r) => r.within);
      // Rows within the budget have every column: the nulls are only on rows past it, dropped just above.
      return { hits: hits.map((r) => ({ row: r.row as TranscriptRow, score: -Number(r.rank) })), total: Number(rows[0]?.total ?? 0) };
    },
  };
}
