/**
 * Cost of one retention statement (part of `npm run bench`) over a small and a
 * large backlog of old rows. A statement deletes at most RETENTION_BATCH_SIZE
 * rows, and must read about that many, however much history is left to delete:
 * an operator turning RETENTION_DAYS on over years of history must not have
 * every statement scan all of it. Its cost may grow with the tables' depth,
 * never with the backlog (target: 20 times the backlog, large/small p50
 * ratio < 2; a statement that scans the backlog measures about 20). The same
 * holds for the items dormant conversations keep (each one's newest): a call
 * over 1,000 times as many quiet conversations, with the same backlog, costs
 * about the same (large/small p50 ratio < 2; one walking every kept item
 * again on each call measured 70).
 *
 * Path measured: `deleteOldHistory` through drizzle on the embedded libSQL
 * file (one EventLog and one Transcript statement per call), the two backlogs
 * called alternately so that both see the same machine noise.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { openEmbeddedDb, type EmbeddedDb } from "../local/libsql";
import { createDb, type Db } from "../src/db/client";
import { deleteOldHistory } from "../src/retention/history";
import { stats } from "./stats";

const CALLS = Number(process.env.BENCH_CALLS ?? 500) / 5;
const BATCH_SIZE = 100;
const TARGET_RATIO = 2;
// The small backlog outlasts every call's deletes; the large one is 20 times it. The dormant pair has the small
// backlog behind 100 or 100,000 quiet conversations' kept items.
const BACKLOGS = { small: 20_000, large: 400_000, dormant_few: 20_000, dormant_many: 20_000 } as const;
const DORMANT: Record<Backlog, number> = { small: 0, large: 0, dormant_few: 100, dormant_many: 100_000 };
type Backlog = keyof typeof BACKLOGS;
const DAY_MS = 24 * 3600 * 1000;
// Platform raw payloads are not seeded: no row names one, so R2 is asked only for the transcript walks' place.
function placeOnlyBucket(): R2Bucket {
  const kept = new Map<string, string>();
  return {
    delete: async () => {},
    get: async (key: string) => (kept.has(key) ? { json: async () => JSON.parse(kept.get(key)!) } : null),
    put: async (key: string, value: string) => void kept.set(key, value),
  } as unknown as R2Bucket;
}

/**
 * `dormant` quiet conversations' old items (each one's newest, kept), then `rows` old EventLog rows and Transcript
 * items (one conversation, no content: nothing to index), then one recent row of each.
 */
async function seed(e: EmbeddedDb, rows: number, dormant: number): Promise<void> {
  const old = Date.now() - 30 * DAY_MS;
  const run = (sql: string, params: unknown[] = []) => e.executor.query({ sql, params, method: "run" });
  const series = `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${rows})`;
  if (dormant) {
    await run(
      `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${dormant}) INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, created_at) SELECT 'd' || i, 'quiet-' || i, 1, 'd' || i, 'user', 'message', ? - ${dormant} + i FROM c`,
      [old],
    );
  }
  await run(`${series} INSERT INTO event_log (event_id, event_type, source, data_json, metadata_json, created_at) SELECT 'e' || i, 'message.received', 'api', '{}', '{}', ? + i FROM c`, [old]);
  await run(`INSERT INTO event_log (event_id, event_type, source, data_json, metadata_json, created_at) VALUES ('recent', 'message.received', 'api', '{}', '{}', ?)`, [Date.now()]);
  await run(`${series} INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, created_at) SELECT 't' || i, 'k', i, 'e' || i, 'user', 'message', ? + i FROM c`, [old]);
  await run(`INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, created_at) VALUES ('recent', 'k', ?, 'recent', 'user', 'message', ?)`, [rows + 1, Date.now()]);
}

export async function benchRetentionBacklog() {
  const dir = mkdtempSync(join(tmpdir(), "agent-host-bench-retention-"));
  const opened: EmbeddedDb[] = [];
  try {
    const dbs = {} as Record<Backlog, Db>;
    const buckets = {} as Record<Backlog, R2Bucket>;
    const seedStarted = performance.now();
    for (const backlog of Object.keys(BACKLOGS) as Backlog[]) {
      const e = await openEmbeddedDb(`file:${join(dir, `${backlog}.db`)}`);
      opened.push(e);
      await seed(e, BACKLOGS[backlog], DORMANT[backlog]);
      dbs[backlog] = createDb(e.executor);
      buckets[backlog] = placeOnlyBucket();
    }
    const seedMs = performance.now() - seedStarted;
    const cutoff = Date.now() - DAY_MS;
    const limits = { batchSize: BATCH_SIZE, maxBatches: 1 };
    const times: Record<Backlog, number[]> = { small: [], large: [], dormant_few: [], dormant_many: [] };
    for (let i = 0; i < CALLS + 5; i++) {
      for (const backlog of Object.keys(BACKLOGS) as Backlog[]) {
        const t0 = performance.now();
        const deleted = await deleteOldHistory(dbs[backlog], buckets[backlog], cutoff, limits);
        const ms = performance.now() - t0;
        // Every call deletes a whole batch of each: a call that deleted less measured something else.
        if (deleted.eventLog !== BATCH_SIZE || deleted.transcript !== BATCH_SIZE) throw new Error(`retention bench: a call deleted ${JSON.stringify(deleted)}, not ${BATCH_SIZE} of each`);
        if (i >= 5) times[backlog].push(ms);
      }
    }
    const small = stats(times.small);
    const large = stats(times.large);
    const dormantFew = stats(times.dormant_few);
    const dormantMany = stats(times.dormant_many);
    return {
      benchmark: "retention-backlog",
      calls_per_backlog: CALLS,
      batch_size: BATCH_SIZE,
      seed_ms: +seedMs.toFixed(1),
      old_rows: BACKLOGS,
      call_ms: { small, large },
      ratio_p50: +(large.p50 / small.p50).toFixed(3),
      ratio_p99: +(large.p99 / small.p99).toFixed(3),
      target_ratio: TARGET_RATIO,
      meets_target: large.p50 / small.p50 < TARGET_RATIO,
      dormant_conversations: { few: DORMANT.dormant_few, many: DORMANT.dormant_many },
      dormant_call_ms: { few: dormantFew, many: dormantMany },
      dormant_ratio_p50: +(dormantMany.p50 / dormantFew.p50).toFixed(3),
      dormant_meets_target: dormantMany.p50 / dormantFew.p50 < TARGET_RATIO,
    };
  } finally {
    for (const e of opened) e.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
