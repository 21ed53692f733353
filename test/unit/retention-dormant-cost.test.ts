import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedDb, type EmbeddedDb } from "../../local/libsql";
import { createDb, type Db } from "../../src/db/client";
import { deleteOldHistory } from "../../src/retention/history";

/**
 * README (Artifacts and retention): "A statement reads about the rows it deletes, however large the backlog of old
 * rows". Each dormant conversation keeps its newest item forever; those kept items sit at the front of the table.
 * Once an invocation has walked past them, later invocations must not walk them again: the cost of a retention call
 * must not grow with the number of quiet conversations.
 *
 * Cost is counted, not timed: SQLite's virtual-machine steps of every prepared statement touching the transcript
 * (the `sqlite_stmt` virtual table of libSQL's build, cumulative per prepared statement; the embedded executor keeps
 * its statements prepared).
 */
const opened: EmbeddedDb[] = [];
afterEach(() => {
  for (const e of opened.splice(0)) e.close();
});

const DAY_MS = 24 * 3600 * 1000;
const OLD_ITEMS = 200;
const LIMITS = { batchSize: 20, maxBatches: 1 };

/** A bucket remembering what is put in it (positions kept between invocations, if any). */
function memoryBucket(): R2Bucket {
  const objects = new Map<string, string>();
  return {
    delete: async () => {},
    get: async (key: string) => {
      const v = objects.get(key);
      return v === undefined ? null : { json: async () => JSON.parse(v), text: async () => v };
    },
    put: async (key: string, value: string) => {
      objects.set(key, value);
      return {};
    },
  } as unknown as R2Bucket;
}

/** `dormant` conversations with one old item each (their newest: kept), then OLD_ITEMS old items of `b`, then a recent one. */
async function seed(dormant: number): Promise<{ e: EmbeddedDb; db: Db }> {
  const e = await openEmbeddedDb(":memory:");
  opened.push(e);
  const old = Date.now() - 30 * DAY_MS;
  const run = (sql: string, params: unknown[] = []) => e.executor.query({ sql, params, method: "run" });
  const series = (n: number) => `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${n})`;
  await run(
    `${series(dormant)} INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, created_at) SELECT 'd' || i, 'dormant-' || i, 1, 'ed' || i, 'user', 'message', ? + i FROM c`,
    [old],
  );
  await run(
    `${series(OLD_ITEMS)} INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, created_at) SELECT 'b' || i, 'b', i, 'eb' || i, 'user', 'message', ? + 100000 + i FROM c`,
    [old],
  );
  await run(`INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, created_at) VALUES ('recent', 'b', ?, 'recent', 'user', 'message', ?)`, [
    OLD_ITEMS + 1,
    Date.now(),
  ]);
  return { e, db: createDb(e.executor) };
}

/** VM steps so far of the prepared statements that name the transcript (not this query's own). */
function transcriptSteps(e: EmbeddedDb): number {
  const rows = e.rows<{ n: number }>(`SELECT COALESCE(SUM(nstep), 0) AS n FROM sqlite_stmt WHERE sql LIKE '%transcript%' AND sql NOT LIKE '%sqlite_stmt%'`);
  return Number(rows[0].n);
}

/** Steps of the second retention call (the first one may walk the dormant items once). */
async function secondCallSteps(dormant: number) {
  const { e, db } = await seed(dormant);
  const bucket = memoryBucket();
  const cutoff = Date.now() - DAY_MS;
  expect((await deleteOldHistory(db, bucket, cutoff, LIMITS)).transcript).toBe(LIMITS.batchSize);
  const before = transcriptSteps(e);
  expect((await deleteOldHistory(db, bucket, cutoff, LIMITS)).transcript).toBe(LIMITS.batchSize);
  return transcriptSteps(e) - before;
}

/** Steps of a call with nothing left to delete (every dormant item kept, `b`'s old items gone). */
async function idleCallSteps(dormant: number) {
  const { e, db } = await seed(dormant);
  const bucket = memoryBucket();
  const cutoff = Date.now() - DAY_MS;
  let deleted = 0;
  for (let i = 0; i < 50; i++) deleted += (await deleteOldHistory(db, bucket, cutoff, { batchSize: 100, maxBatches: 20 })).transcript;
  expect(deleted).toBe(OLD_ITEMS);
  const before = transcriptSteps(e);
  expect((await deleteOldHistory(db, bucket, cutoff, LIMITS)).transcript).toBe(0);
  return transcriptSteps(e) - before;
}

describe("transcript retention cost vs number of dormant conversations", () => {
  it("a later call deleting a batch costs about the same over 20 or 5,000 dormant conversations", async () => {
    const few = await secondCallSteps(20);
    const many = await secondCallSteps(5_000);
    expect(few).toBeGreaterThan(0);
    expect(many / few, `VM steps: ${few} with 20 dormant conversations, ${many} with 5,000`).toBeLessThan(2);
  });

  it("a call with nothing left to delete costs about the same over 20 or 5,000 dormant conversations", async () => {
    const few = await idleCallSteps(20);
    const many = await idleCallSteps(5_000);
    expect(few).toBeGreaterThan(0);
    expect(many / few, `VM steps: ${few} with 20 dormant conversations, ${many} with 5,000`).toBeLessThan(2);
  });
});
