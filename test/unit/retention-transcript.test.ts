import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedDb, type EmbeddedDb } from "../../local/libsql";
import { createDb } from "../../src/db/client";
import type { SqlQuery } from "../../src/db/executor";
import { deleteOldHistory } from "../../src/retention/history";

/**
 * Transcript retention keeps each conversation's newest item (its seq numbering
 * must not restart) and deletes the other old items, oldest first, batchSize per
 * statement. Dormant conversations leave their kept items at the front of the
 * table; a statement must not rescan them once an earlier one has passed them.
 */
let e: EmbeddedDb | undefined;
afterEach(() => e?.close());

const DAY_MS = 24 * 3600 * 1000;
const BUCKET = { delete: async () => {} } as unknown as R2Bucket; // no EventLog rows: never called

/** Items in insertion (rowid) order: [conversation, seq, old?]. */
async function seed(items: [string, number, boolean][]) {
  e = await openEmbeddedDb(":memory:");
  const old = Date.now() - 3 * DAY_MS;
  for (const [i, [conv, seq, isOld]] of items.entries()) {
    await e.executor.query({
      sql: "INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, content, created_at) VALUES (?, ?, ?, ?, 'user', 'message', 'x', ?)",
      params: [`t${i}`, conv, seq, `e${i}`, isOld ? old + i : Date.now() + i],
      method: "run",
    });
  }
  const statements: SqlQuery[] = [];
  const db = createDb({ query: (q) => (statements.push(q), e!.executor.query(q)), batch: (qs) => (statements.push(...qs), e!.executor.batch(qs)) });
  return { db, statements };
}
const left = () => e!.rows<{ k: string; seq: number }>("SELECT conversation_key AS k, seq FROM transcript ORDER BY rowid").map((r) => `${r.k}${r.seq}`);

describe("transcript retention", () => {
  it("deletes every old item but each conversation's newest, across statements that each start where the last stopped", async () => {
    // Dormant conversations d1..d3 (one old item each, kept) interleaved with b's old items; b and a have recent items too.
    const { db } = await seed([
      ["d", 1, true],
      ["b", 1, true],
      ["e", 1, true],
      ["b", 2, true],
      ["b", 3, true],
      ["f", 1, true],
      ["a", 1, true],
      ["b", 4, true],
      ["a", 2, true],
      ["b", 5, false],
      ["a", 3, false],
    ]);
    const cutoff = Date.now() - DAY_MS;
    // Two per statement, three statements: b1 b2 | b3 a1 | b4 a2.
    expect((await deleteOldHistory(db, BUCKET, cutoff, { batchSize: 2, maxBatches: 3 })).transcript).toBe(6);
    expect(left()).toEqual(["d1", "e1", "f1", "b5", "a3"]);
    // Nothing more to delete: the dormant conversations' newest items stay.
    expect((await deleteOldHistory(db, BUCKET, cutoff, { batchSize: 2, maxBatches: 3 })).transcript).toBe(0);
    expect(left()).toEqual(["d1", "e1", "f1", "b5", "a3"]);
  });

  it("stops at the invocation's bound and resumes on the next", async () => {
    const { db, statements } = await seed([
      ["d", 1, true],
      ["b", 1, true],
      ["b", 2, true],
      ["b", 3, true],
      ["b", 4, true],
      ["b", 5, false],
    ]);
    const cutoff = Date.now() - DAY_MS;
    expect((await deleteOldHistory(db, BUCKET, cutoff, { batchSize: 1, maxBatches: 2 })).transcript).toBe(2);
    expect(left()).toEqual(["d1", "b3", "b4", "b5"]);
    expect(statements.filter((q) => /delete from "transcript"/i.test(q.sql))).toHaveLength(2);
    expect((await deleteOldHistory(db, BUCKET, cutoff, { batchSize: 1, maxBatches: 2 })).transcript).toBe(2);
    expect(left()).toEqual(["d1", "b5"]);
  });

  it("stops at the first recent item inside a statement's batch, and deletes nothing past it", async () => {
    // One batch of ten reaches past the cutoff: b1..b3 are old, b4 and c1 recent, a1 (old, a's newest) kept.
    const { db } = await seed([
      ["b", 1, true],
      ["a", 1, true],
      ["b", 2, true],
      ["b", 3, true],
      ["b", 4, false],
      ["c", 1, false],
      ["b", 5, false],
    ]);
    const cutoff = Date.now() - DAY_MS;
    expect((await deleteOldHistory(db, BUCKET, cutoff, { batchSize: 10, maxBatches: 3 })).transcript).toBe(3);
    expect(left()).toEqual(["a1", "b4", "c1", "b5"]);
  });
});
