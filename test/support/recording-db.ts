import { afterEach } from "vitest";
import { openEmbeddedDb, type EmbeddedDb } from "../../local/libsql";
import { createDb, type Db } from "../../src/db/client";
import type { SqlExecutor, SqlQuery } from "../../src/db/executor";
import { secretBox } from "../../src/lib/secret-box";

/**
 * An in-memory libSQL database with the migrations applied, whose stores' statements are kept as sent (`sent`), for
 * tests that explain the plans SQLite makes for them; `run` sends raw SQL past the recording. Each test's are closed
 * after it (call once per file).
 */
export function recordingDbs(): () => Promise<{ e: EmbeddedDb; db: Db; sent: SqlQuery[]; run: (sql: string, params?: unknown[]) => Promise<unknown> }> {
  const opened: EmbeddedDb[] = [];
  afterEach(() => {
    for (const e of opened.splice(0)) e.close();
  });
  return async () => {
    const e = await openEmbeddedDb(":memory:");
    opened.push(e);
    const sent: SqlQuery[] = [];
    const recording: SqlExecutor = {
      query: (q) => (sent.push(q), e.executor.query(q)),
      batch: (qs) => (sent.push(...qs), e.executor.batch(qs)),
    };
    const run = (sql: string, params: unknown[] = []) => e.executor.query({ sql, params, method: "run" });
    return { e, db: createDb(recording, secretBox(Buffer.alloc(32, 7).toString("base64"))), sent, run };
  };
}
