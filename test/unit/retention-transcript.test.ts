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
afterEach(() => {
  e?.close();
  stored.clear();
});

const DAY_MS = 24 * 3600 * 1000;
// No EventLog rows: nothing deleted from it. It keeps the transcript walks' place between invocations.
const stored = new Map<string, string>();
const BUCKET = {
  delete: async () => {},
  get: async (key: string) => (stored.has(key) ? { json: async () => JSON.parse(stored.get(key)!) } : null),
  put: async (key: string, value: string) => void stored.set(key, value),
} as unknown as R2Bucket;

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
async function append(conv: string, seq: number, createdAt: number) {
  await e!.executor.query({
    sql: "INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, content, created_at) VALUES (?, ?, ?, ?, 'user', 'message', 'x', ?)",
    params: [`a-${conv}${seq}`, conv, seq, `ea-${conv}${seq}`, createdAt],
    method: "run",
  });
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
  it("deletes a kept item passed by an earlier invocation once its conversation gets a newer one", async () => {
    const { db } = await seed([
      ["d", 1, true],
      ["b", 1, true],
      ["b", 2, true],
      ["b", 3, false],
    ]);
    const cutoff = Date.now() - DAY_MS;
    expect((await deleteOldHistory(db, BUCKET, cutoff, { batchSize: 10, maxBatches: 3 })).transcript).toBe(2);
    expect(left()).toEqual(["d1", "b3"]);
    await append("d", 2, Date.now());
    // d1 is old and no longer d's newest (found with a single statement allowed, the old rows' walk having caught up).
    expect((await deleteOldHistory(db, BUCKET, cutoff, { batchSize: 10, maxBatches: 1 })).transcript).toBe(1);
    expect(left()).toEqual(["b3", "d2"]);
  });

  it("deletes an item whose newer one came while it was recent, once it is old", async () => {
    const now = Date.now();
    const { db } = await seed([["b", 1, true]]);
    await append("d", 1, now - 2 * DAY_MS);
    await append("b", 2, now);
    const firstCutoff = now - 3 * DAY_MS; // d1 is recent then
    expect((await deleteOldHistory(db, BUCKET, firstCutoff, { batchSize: 10, maxBatches: 3 })).transcript).toBe(0);
    await append("d", 2, now);
    expect((await deleteOldHistory(db, BUCKET, firstCutoff, { batchSize: 10, maxBatches: 3 })).transcript).toBe(0);
    // A day later: b1 and d1 are old, and neither is its conversation's newest.
    expect((await deleteOldHistory(db, BUCKET, now - DAY_MS, { batchSize: 10, maxBatches: 3 })).transcript).toBe(2);
    expect(left()).toEqual(["b2", "d2"]);
  });

  it("starts over from a kept place past the table's end (rows renumbered by a VACUUM, a restored database)", async () => {
    const { db } = await seed([
      ["d", 1, true],
      ["b", 1, true],
      ["b", 2, false],
    ]);
    stored.set("host/transcript-sweep.json", JSON.stringify({ after: 1000, checked: 1000, cutoff: 0 }));
    expect((await deleteOldHistory(db, BUCKET, Date.now() - DAY_MS, { batchSize: 10, maxBatches: 3 })).transcript).toBe(1);
    expect(left()).toEqual(["d1", "b2"]);
  });
  it("deletes an item kept under a shorter RETENTION_DAYS once its conversation goes on and it is old under the longer one", async () => {
    const now = Date.now();
    const { db } = await seed([]);
    await append("d", 1, now - 5 * DAY_MS);
    await append("b", 1, now - 4 * DAY_MS);
    await append("b", 2, now);
    // RETENTION_DAYS 1: d1 passed and kept (d's newest), b1 deleted.
    expect((await deleteOldHistory(db, BUCKET, now - DAY_MS, { batchSize: 10, maxBatches: 3 })).transcript).toBe(1);
    // Raised to 10: d goes on, and d1 is recent under the new cutoff.
    await append("d", 2, now);
    expect((await deleteOldHistory(db, BUCKET, now - 10 * DAY_MS, { batchSize: 10, maxBatches: 3 })).transcript).toBe(0);
    // Days later d1 is old under it too, and not d's newest.
    expect((await deleteOldHistory(db, BUCKET, now - 4.5 * DAY_MS, { batchSize: 10, maxBatches: 3 })).transcript).toBe(1);
    expect(left()).toEqual(["b2", "d2"]);
  });
});
