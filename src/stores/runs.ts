import { and, asc, desc, eq, getTableColumns, gt, inArray, lt, or, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { compiled, param } from "../db/compiled";
import { insertWhereReturning } from "../db/guarded";
import { ledgerInserts } from "./ledger-inserts";
import { whileRunning } from "./while-running";
import { runListConditions, type RunListFilter } from "./run-list-filter";
import { notRecalled } from "./recalled-message";
import { agent, eventLog, run, runEvent, transcript } from "../db/schema";
import { encodeCursor } from "../lib/cursor";
import { iso, parseJson } from "../lib/json";
import { parseKeepingIntegers } from "../lib/exact-json";
import { budgetedPage, byteLength, fieldsOf, ifWithin, rowBytes, runningBytes, withinBudget } from "../db/byte-budget";

export type RunRow = typeof run.$inferSelect;
export type RunStatus = "created" | "running" | "completed" | "failed" | "cancelled" | "timeout";
/**
 * A run not started yet: `created`, or `queued` as the Worker before migration 0005 still writes it while a deploy
 * rolls out. Both are claimed, cancelled and ended alike.
 */
export const NOT_STARTED = ["created", "queued"] as const;
export const isNotStarted = (status: string | undefined) => status === "created" || status === "queued";

export function toRunView(row: RunRow) {
  return {
    run_id: row.runId,
    event_id: row.eventId,
    // `queued` (the Worker before migration 0005) is `created` in PROTOCOL §11's names.
    status: (isNotStarted(row.status) ? "created" : row.status) as RunStatus,
    agent_id: row.agentId,
    runner_id: row.runnerId,
    // With the bot and workspace, the names a conversation read takes (a workspace's bot's chat is keyed by both).
    conversation_id: row.conversationId ?? undefined,
    thread_id: row.threadId ?? undefined,
    workspace_id: row.workspaceId ?? undefined,
    bot_id: row.botId ?? undefined,
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
  /** A runner result the host dropped (invalid, unknown, refused): recorded as sent, never acted on. Not stored. */
  dropped?: true;
}

/** A ledger row's data as written: an upstream's 64-bit id in a tool result is given back digit for digit (lib/exact-json). */
function ledgerData(text: string): unknown {
  try {
    return parseKeepingIntegers(text);
  } catch {
    return {};
  }
}

/** A recorded ledger row as the entry it was written from (for followers and replies replayed from the database). */
export function ledgerEntryOf(r: { runId: string; seq: number; type: string; dataJson: string; runnerSequence: number | null; origin: string; createdAt: number }): LedgerEntry {
  return { runId: r.runId, seq: r.seq, type: r.type, data: parseKeepingIntegers(r.dataJson), runnerSequence: r.runnerSequence, origin: r.origin as LedgerEntry["origin"], createdAt: r.createdAt };
}

export function toLedgerView(e: { runId: string; seq: number; type: string; dataJson: string; runnerSequence: number | null; origin: string; createdAt: number }) {
  return {
    seq: e.seq,
    cursor: encodeCursor("r", e.seq, e.runId),
    type: e.type,
    data: ledgerData(e.dataJson),
    sequence: e.runnerSequence ?? undefined,
    origin: e.origin,
    created_at: iso(e.createdAt),
  };
}

export interface RunOutcome {
  status: Exclude<RunStatus, "created" | "running">;
  finishReason?: string | null;
  finalMessage?: unknown;
  errorCode?: string | null;
  errorMessage?: string | null;
  /** A failure the host records itself: whether the same event sent again may well run (its `run.failed`'s `retryable`). */
  retryable?: boolean;
}

const getRun = compiled((db) => db.select().from(run).where(eq(run.runId, param("runId"))).limit(1));

/** Whether a platform accepted any send of the run's reply: its delivery trail in EventLog says so. */
const deliveredReply = compiled((db) =>
  db
    .select({ seq: eventLog.seq })
    .from(eventLog)
    // Within the conversation's range of the EventLog index, so no table scan.
    .where(and(eq(eventLog.conversationKey, param("conversationKey")), eq(eventLog.runId, param("runId")), eq(eventLog.eventType, "delivery.succeeded")))
    .limit(1),
);

const markRunning = compiled((db) =>
  db
    .update(run)
    // The run goes to its agent's runner as it is now (an operator may have moved the agent while the run was queued),
    // only if that agent can still take it (claim.ts refusalOf): enabled, and the agent as created (its state epoch;
    // `anyEpoch` for a job stored before epochs). Another agent created under its id never gets the run's record.
    .set({
      status: "running",
      startedAt: sql`${param("startedAt")}`,
      runnerId: sql`COALESCE((SELECT ${agent.runnerId} FROM ${agent} WHERE ${agent.agentId} = ${run.agentId} AND ${agent.enabled} = 1 AND (${param("anyEpoch")} = 1 OR ${agent.stateEpoch} IS ${param("agentEpoch")})), ${run.runnerId})`,
    })
    // Or one this instance's own earlier claim may have started (its write went unanswered): `resumeAt` is that claim's stamp, null when none.
    .where(and(eq(run.runId, param("runId")), or(inArray(run.status, [...NOT_STARTED]), and(eq(run.status, "running"), eq(run.startedAt, param("resumeAt")))), notRecalled(param("messageEventId"))))
    .returning({ runId: run.runId }),
);

const discardQueued = compiled((db) => db.delete(run).where(and(eq(run.runId, param("runId")), inArray(run.status, [...NOT_STARTED]))));

/**
 * A run's `result_count`: its runner's results the ledger holds, counted by the end's write itself. What the run read
 * is no measure: a batch the database refused or gave no answer to may never have been written. Counted from indexes
 * alone (the write holds the database's lock, and a ledger has up to RUN_MAX_RESULTS entries): all the run's entries,
 * from the primary key's, less its host-made ones, from run_event_host's (`origin` is "runner" or "host").
 */
const recordedResults = sql`((SELECT COUNT(*) FROM ${runEvent} WHERE ${runEvent.runId} = ${run.runId}) - (SELECT COUNT(*) FROM ${runEvent} WHERE ${runEvent.runId} = ${run.runId} AND ${runEvent.origin} = 'host'))`;

/** The run's last message item, as the message a run's end records: what the transcript holds, whatever its writes became. */
const recordedMessage = sql`(SELECT json_object('role', t.role, 'content', COALESCE(json(t.content_json), t.content)) FROM ${transcript} t WHERE t.event_id = ${run.eventId} AND t.run_id = ${run.runId} AND t.item_type = 'message' ORDER BY t.seq DESC LIMIT 1)`;

/**
 * The host's end of a run it did not see end (lost session, host failure): what the run recorded before stands in for
 * the message its own end would have written, its last message item; the count is the ledger's, as for any end.
 */
const finishRunAsHost = compiled((db) =>
  db
    .update(run)
    .set({
      status: sql`${param("status")}`,
      errorCode: sql`${param("errorCode")}`,
      errorMessage: sql`${param("errorMessage")}`,
      resultCount: recordedResults,
      finalMessageJson: recordedMessage,
      endedAt: sql`${param("endedAt")}`,
    })
    .where(and(eq(run.runId, param("runId")), inArray(run.status, [...NOT_STARTED, "running"])))
    .returning({ runId: run.runId }),
);

/** A run's own end, its final message as given (`finalMessage`), only while it has not ended: the update answers its run id when it ended it. */
const runEnd = (finalMessage: SQL) =>
  compiled((db) =>
    db
      .update(run)
      .set({
        status: sql`${param("status")}`,
        finishReason: sql`${param("finishReason")}`,
        finalMessageJson: finalMessage,
        errorCode: sql`${param("errorCode")}`,
        errorMessage: sql`${param("errorMessage")}`,
        resultCount: recordedResults,
        endedAt: sql`${param("endedAt")}`,
      })
      .where(and(eq(run.runId, param("runId")), inArray(run.status, [...NOT_STARTED, "running"])))
      .returning({ runId: run.runId }),
  );
const finishRun = runEnd(sql`${param("finalMessageJson")}`);
/** finishRun, its message the last message item the transcript holds (a write of the run whose answer never came may or may not have added one). */
const finishRunWithRecordedMessage = runEnd(recordedMessage);

/** End a run that is still only queued (never a running one: that is ended by its own run). */
const endQueuedRun = compiled((db) =>
  db
    .update(run)
    .set({ status: sql`${param("status")}`, errorCode: sql`${param("errorCode")}`, errorMessage: sql`${param("errorMessage")}`, endedAt: sql`${param("endedAt")}` })
    .where(and(eq(run.runId, param("runId")), inArray(run.status, [...NOT_STARTED])))
    .returning({ runId: run.runId }),
);

/** Runs not started that were recorded before `before`, oldest first, after a (created_at, run_id) position. */
const notStartedBefore = compiled((db) =>
  db
    .select({ runId: run.runId, conversationKey: run.conversationKey, createdAt: run.createdAt })
    .from(run)
    .where(
      and(
        inArray(run.status, [...NOT_STARTED]),
        lt(run.createdAt, param("before")),
        or(gt(run.createdAt, param("afterTime")), and(eq(run.createdAt, param("afterTime")), gt(run.runId, param("afterId")))),
      ),
    )
    .orderBy(asc(run.createdAt), asc(run.runId))
    .limit(param("limit")),
);

/**
 * One ledger row, written only while its run is running: a write held on the wire (answered too late, maybe applied
 * later still) that lands after the run's end adds nothing past it, which its followers, told already, would never get.
 * Answers the row's seq when written.
 */
const ledgerRowWhileRunning = compiled((db) =>
  insertWhereReturning(
    db,
    runEvent,
    { runId: param("runId"), seq: param("seq"), type: param("type"), dataJson: param("dataJson"), runnerSequence: param("runnerSequence"), origin: param("origin"), createdAt: param("createdAt") },
    whileRunning(param("runId")),
    sql`${runEvent.seq}`,
  ),
);

/** A page of `GET /v1/runs` carries at most this many bytes of final messages and errors past its first run. */
export const RUNS_PAGE_MAX_BYTES = 4 * 1024 * 1024;

/** A ledger page holds entries until their data passes this many bytes (the first always). */
export const LEDGER_PAGE_BYTES = 1024 * 1024;

type RunEventRow = typeof runEvent.$inferSelect;

/**
 * Entries after a seq, one past the limit, each with its data while the
 * running total of data bytes stays in the budget (null after, for the one
 * entry that crosses it): the cut is made in the database, so data past it
 * never travels, and what comes back says whether there is more.
 */
const ledgerPage = compiled((db) => {
  const e = runEvent;
  const page = db
    .select({
      runId: e.runId,
      seq: e.seq,
      type: e.type,
      dataJson: e.dataJson,
      runnerSequence: e.runnerSequence,
      origin: e.origin,
      createdAt: e.createdAt,
      bytes: runningBytes(e.dataJson, e.seq).as("bytes"),
      own: byteLength(e.dataJson).as("own"),
      n: sql<number>`row_number() over (order by ${e.seq})`.as("n"),
    })
    .from(e)
    .where(and(eq(e.runId, param("runId")), gt(e.seq, param("afterSeq"))))
    .orderBy(asc(e.seq))
    .limit(param("scanned"))
    .as("page");
  const inBudget = sql`(${page.n} = 1 or ${page.bytes} <= ${param("maxBytes")})`;
  return db
    .select({
      runId: page.runId,
      seq: page.seq,
      type: page.type,
      dataJson: sql<string | null>`case when ${inBudget} then ${page.dataJson} end`,
      runnerSequence: page.runnerSequence,
      origin: page.origin,
      createdAt: page.createdAt,
    })
    .from(page)
    // The entries that start within the budget, and the second always: one past the cut, to tell there is more.
    .where(sql`${page.n} <= 2 or ${page.bytes} - ${page.own} <= ${param("maxBytes")}`)
    .orderBy(asc(page.seq));
});

/** Statuses after which nothing more is added to a run's ledger. */
export const ENDED = ["completed", "failed", "cancelled", "timeout"] as const;

/**
 * While a run is live its results are numbered when read and written with
 * their batch, so a Host API record numbered later can be visible first. A
 * follower is shown only the unbroken stretch of seqs after its position, so
 * its cursor never passes an entry still to come. A seq that is never written
 * (its write failed) holds the rest back until the run ends.
 */
export function settledPrefix<T extends { seq: number }>(rows: T[], afterSeq: number): T[] {
  let expected = afterSeq + 1;
  const hole = rows.findIndex((r) => r.seq !== expected++);
  return hole < 0 ? rows : rows.slice(0, hole);
}

export function runsStore(db: Db) {
  return {
    get: async (runId: string): Promise<RunRow | undefined> => (await getRun(db, { runId }).execute())[0],
    /** Whether the user saw any of the run's reply (not what the runner sent: what a platform accepted). */
    deliveredReply: async (conversationKey: string, runId: string): Promise<boolean> => (await deliveredReply(db, { conversationKey, runId }).execute()).length > 0,

    /**
     * created → running, stamped `startedAt`; returns the run id only when this trigger took the run (see markRunning for
     * `resumeAt`). `agentEpoch`: the state epoch of the agent the run was bound to (undefined for a job stored before epochs).
     * `messageEventId`: the message it answers, which it does not start once recalled (null: started all the same).
     */
    markRunningStatement: (runId: string, startedAt: number, resumeAt: number | null, agentEpoch: string | null | undefined, messageEventId: string | null) =>
      markRunning(db, { runId, startedAt, resumeAt, anyEpoch: agentEpoch === undefined ? 1 : 0, agentEpoch: agentEpoch ?? null, messageEventId }),

    /** Drop a run minted at ingress that the conversation decided not to start (steered or rejected). */
    discardQueuedStatement: (runId: string) => discardQueued(db, { runId }),

    /** created → the outcome's status; returns the run id only when the run had not started. */
    endQueuedStatement: (runId: string, outcome: RunOutcome, endedAt = Date.now()) =>
      endQueuedRun(db, { runId, status: outcome.status, errorCode: outcome.errorCode ?? null, errorMessage: outcome.errorMessage ?? null, endedAt }),

    /** A page of runs not started that were recorded before `before`, oldest first, after `after`. */
    notStartedBefore: (before: number, after: { createdAt: number; runId: string }, limit: number) =>
      notStartedBefore(db, { before, afterTime: after.createdAt, afterId: after.runId, limit }).execute(),

    /** The host's terminal write for a run whose own end never came (finishRunAsHost); only a run not ended yet is changed. */
    finishAsHostStatement: (runId: string, outcome: RunOutcome, endedAt = Date.now()) =>
      finishRunAsHost(db, { runId, status: outcome.status, errorCode: outcome.errorCode ?? null, errorMessage: outcome.errorMessage ?? null, endedAt }),

    /** The terminal write; only a run that has not ended yet is changed. Returns the run id when this write ended it. `messageRecorded`: its message is the transcript's last of the run (finishRunWithRecordedMessage); `endedAt`, its `ended_at`. */
    finishStatement: (runId: string, outcome: RunOutcome, opts: { messageRecorded?: boolean; endedAt?: number } = {}) => {
      const values = { runId, status: outcome.status, finishReason: outcome.finishReason ?? null, errorCode: outcome.errorCode ?? null, errorMessage: outcome.errorMessage ?? null, endedAt: opts.endedAt ?? Date.now() };
      if (opts.messageRecorded) return finishRunWithRecordedMessage(db, values);
      return finishRun(db, { ...values, finalMessageJson: outcome.finalMessage === undefined ? null : JSON.stringify(outcome.finalMessage) });
    },

    /** Ledger rows (ledger-inserts.ts); `onlyWhileRunning`, added only while the run is running. */
    ledgerInserts: (entries: LedgerEntry[], onlyWhileRunning = false) => ledgerInserts(db, entries, onlyWhileRunning),

    /** Host API records, one statement each, written only while the run is running (ledgerRowWhileRunning); each statement answers a row when its entry was written. */
    hostRecordInserts(entries: LedgerEntry[]) {
      return entries.map((e) => ledgerRowWhileRunning(db, { runId: e.runId, seq: e.seq, type: e.type, dataJson: JSON.stringify(e.data === undefined ? {} : e.data), runnerSequence: e.runnerSequence ?? null, origin: e.origin, createdAt: e.createdAt }));
    },

    /** Entries after a seq, at most `limit` and (past the first) LEDGER_PAGE_BYTES of data: a page's size is bounded whatever the runner sent. */
    async ledger(runId: string, afterSeq: number, limit: number, maxBytes = LEDGER_PAGE_BYTES) {
      const rows = await ledgerPage(db, { runId, afterSeq, scanned: limit + 1, maxBytes }).execute();
      const kept = rows.filter((r, i): r is RunEventRow => r.dataJson !== null && i < limit);
      return { rows: kept, hasMore: rows.length > kept.length };
    },

    /** The host's warnings after a seq, only the result each names (`ledger_seq`) and its code: what marks a result read back dropped. */
    warningsAfter(runId: string, afterSeq: number): Promise<{ ledger_seq: unknown; code: unknown }[]> {
      const field = (path: string) => sql<unknown>`json_extract(${runEvent.dataJson}, ${path})`;
      const where = and(eq(runEvent.runId, runId), gt(runEvent.seq, afterSeq), eq(runEvent.type, "host.warning"), eq(runEvent.origin, "host"));
      return db.select({ ledger_seq: field("$.ledger_seq"), code: field("$.code") }).from(runEvent).where(where).all();
    },

    /** Newest first, keyset-paged on (created_at, run_id) so a page costs the same however deep it is. */
    async list(filter: RunListFilter) {
      const conds = runListConditions(filter);
      // A run not started is `created` to readers, however it was stored (NOT_STARTED).
      if (filter.status) conds.push(filter.status === "created" ? inArray(run.status, [...NOT_STARTED]) : eq(run.status, filter.status));
      // A row value, which the index reads as a range (two OR-ed terms on two parameters it cannot): deep pages cost what the first does.
      if (filter.before) conds.push(sql`(${run.createdAt}, ${run.runId}) < (${filter.before.time}, ${filter.before.id})`);
      // Cut to RUNS_PAGE_MAX_BYTES in the database, as the other pages are: 200 final messages of a MiB never travel.
      const read = db
        .select({ ...getTableColumns(run), own: rowBytes(run.finalMessageJson, run.errorMessage).as("own") })
        .from(run)
        .where(conds.length ? and(...conds) : sql`1`)
        .orderBy(desc(run.createdAt), desc(run.runId))
        .limit(filter.limit + 1)
        .as("read");
      const within = withinBudget(read.own, sql`order by ${read.createdAt} desc, ${read.runId} desc`, RUNS_PAGE_MAX_BYTES);
      const rows = await db
        .select({ ...fieldsOf(read, getTableColumns(run)), finalMessageJson: ifWithin<string>(within, read.finalMessageJson), errorMessage: ifWithin<string>(within, read.errorMessage), within })
        .from(read)
        .orderBy(desc(read.createdAt), desc(read.runId))
        .all();
      // Rows within the budget have every column: the nulls are only on rows past it, which budgetedPage drops.
      return budgetedPage(rows, filter.limit) as { rows: RunRow[]; hasMore: boolean };
    },
  };
}
