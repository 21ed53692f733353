import { sql, type Placeholder } from "drizzle-orm";
import type { Db } from "../db/client";
import { compiled, param } from "../db/compiled";
import { runEvent } from "../db/schema";
import type { LedgerEntry } from "./runs";
import { whileRunning } from "./while-running";

const LEDGER_ROWS_PER_STATEMENT = 16;
const COLUMNS = ["runId", "seq", "type", "dataJson", "runnerSequence", "origin", "createdAt"] as const;

const compileInsert = (rows: number) =>
  compiled((db) =>
    db.insert(runEvent).values(Array.from({ length: rows }, (_, j) => Object.fromEntries(COLUMNS.map((c) => [c, param(`${c}${j}`)])) as Record<(typeof COLUMNS)[number], Placeholder>)),
  );

/** compileInsert's rows, written only while their run is running (all of one statement are one run's). */
const compileInsertWhileRunning = (rows: number) =>
  compiled((db) => {
    const names = sql.join(COLUMNS.map((c) => sql.identifier(runEvent[c].name)), sql`, `);
    const row = (j: number) => sql`(${sql.join(COLUMNS.map((c) => sql`${param(`${c}${j}`)}`), sql`, `)})`;
    const tuples = sql.join(Array.from({ length: rows }, (_, j) => row(j)), sql`, `);
    return db.run(sql`INSERT INTO ${runEvent} (${names}) SELECT * FROM (VALUES ${tuples}) WHERE ${whileRunning(param("runId0"))}`);
  });

/** Each statement compiled once per row count. */
function byRows<S>(compile: (rows: number) => S): (rows: number) => S {
  const made = new Map<number, S>();
  return (rows) => {
    let statement = made.get(rows);
    if (!statement) made.set(rows, (statement = compile(rows)));
    return statement;
  };
}
const plainInsert = byRows(compileInsert);
const guardedInsert = byRows(compileInsertWhileRunning);

/**
 * Ledger rows, at most LEDGER_ROWS_PER_STATEMENT per statement; `data: null` kept as sent. `onlyWhileRunning`: each
 * statement adds its rows only while their run is running (whileRunning).
 */
export function ledgerInserts(db: Db, entries: LedgerEntry[], onlyWhileRunning = false) {
  const statements = [];
  for (let i = 0; i < entries.length; i += LEDGER_ROWS_PER_STATEMENT) {
    const rows = entries.slice(i, i + LEDGER_ROWS_PER_STATEMENT);
    const values: Record<string, unknown> = {};
    rows.forEach((e, j) => {
      values[`runId${j}`] = e.runId;
      values[`seq${j}`] = e.seq;
      values[`type${j}`] = e.type;
      values[`dataJson${j}`] = JSON.stringify(e.data === undefined ? {} : e.data);
      values[`runnerSequence${j}`] = e.runnerSequence ?? null;
      values[`origin${j}`] = e.origin;
      values[`createdAt${j}`] = e.createdAt;
    });
    statements.push(onlyWhileRunning ? guardedInsert(rows.length)(db, values) : plainInsert(rows.length)(db, values));
  }
  return statements;
}
