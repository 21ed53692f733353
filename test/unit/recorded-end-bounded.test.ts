import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { beforeAll, describe, expect, it } from "vitest";
import { createDb, type Db } from "../../src/db/client";
import { libsqlExecutor, type SqlExecutor } from "../../src/db/executor";
import { recordedEnd } from "../../src/run/recorded-end";
import { ledgerDrops, unauditedDropsInsert } from "../../src/run/drop-records";

/**
 * What a run the host ends owes its records (its trailing artifacts' item, the count of its drops past the audit cap)
 * is rebuilt from its ledger. A runner flooding invalid results leaves a warning per result there (up to its stream's
 * 32 MiB: hundreds of thousands): the host's end reads a few rows whatever the ledger holds, never the ledger itself,
 * and leaves dropped announcements out; its write counts the drops without an audit in the database, and counts right
 * (unknown result types are ignored, not dropped).
 */
let client: Client;
let rowsRead = 0;
let db: Db;
const RUN = "run_flooded";
const DROPS = 1_500; // the refused announcement and the blank message among them
const UNKNOWN = 400;
// Only the fields recordedEnd reads: a whole run job is not needed to rebuild its end.
const job = {
  runId: RUN,
  conversationKey: "k1",
  conversation: { conversation_id: "C1", thread_id: null, workspace_id: null, bot_id: null },
  event: { event_id: "ev1" },
  delivery: null,
  runner: { runnerId: "http:tests/flood/default" },
} as unknown as Parameters<typeof recordedEnd>[1];

beforeAll(async () => {
  client = createClient({ url: ":memory:" });
  await migrate(drizzle(client), { migrationsFolder: "migrations" });
  const real = libsqlExecutor(client);
  // The real database, its answers counted: what the host's end takes over the wire and holds.
  const counted: SqlExecutor = {
    query: async (q) => {
      const r = await real.query(q);
      rowsRead += Array.isArray(r.rows?.[0]) ? r.rows.length : r.rows ? 1 : 0;
      return r;
    },
    batch: async (qs) => {
      const rs = await real.batch(qs);
      for (const r of rs) rowsRead += r.rows.length;
      return rs;
    },
  };
  db = createDb(counted);
  const rows: [number, string, string, string][] = [];
  let seq = 0;
  // A warning names the entry just added (`seq`, read before its own is numbered).
  const add = (origin: string, type: string, data: unknown) => rows.push([++seq, origin, type, JSON.stringify(data)]);
  // Carried by the message after it; the one after that message, and only it, is owed an item of its own.
  add("runner", "artifact.created", { artifact_id: "art_carried", artifact_type: "file" });
  add("runner", "message.completed", { message: { role: "assistant", content: "hi" } });
  add("runner", "artifact.created", { artifact_id: "art_kept", artifact_type: "file" });
  add("runner", "artifact.created", { artifact_id: "art_refused", artifact_type: "file" });
  add("host", "host.warning", { code: "result.invalid_payload", message: "artifact.created dropped", ledger_seq: seq });
  // A blank message is dropped: it made no transcript item, so it carries nothing.
  add("runner", "message.completed", { message: { role: "assistant", content: " " } });
  add("host", "host.warning", { code: "result.invalid_payload", message: "message.completed dropped", ledger_seq: seq });
  for (let i = 0; i < DROPS - 2; i++) {
    add("runner", "state.updated", { scope: "galaxy", key: `k${i}`, value: i });
    add("host", "host.warning", { code: "result.invalid_payload", message: "state.updated dropped", ledger_seq: seq });
  }
  for (let i = 0; i < UNKNOWN; i++) {
    add("runner", "custom.thing", { i });
    add("host", "host.warning", { code: "result.unknown_type", message: "unknown result type custom.thing ignored", ledger_seq: seq });
  }
  // A warning naming no result (a sequence gap) is no drop.
  add("host", "host.warning", { code: "result.sequence_gap", message: "sequence jumped", sequence: 9 });
  await client.batch(
    [
      ...rows.map(([s, origin, type, data]) => ({ sql: "INSERT INTO run_event (run_id, seq, type, data_json, origin, created_at) VALUES (?, ?, ?, ?, ?, 1)", args: [RUN, s, type, data, origin] })),
      // The run's first 100 drops were audited, each with its result and warning.
      ...Array.from({ length: 100 }, (_, i) => ({
        sql: "INSERT INTO event_log (event_id, event_type, source, conversation_key, run_id, data_json, created_at) VALUES (?, 'runner.result_dropped', 'system', 'k1', ?, ?, 1)",
        args: [`hev_audit_${i}`, RUN, JSON.stringify({ run_id: RUN, ledger_seq: 10 + 2 * i })],
      })),
      ...["art_carried", "art_kept", "art_refused"].map((id) => ({
        sql: "INSERT INTO artifact (artifact_id, artifact_type, source, conversation_key, run_id, r2_key, created_at) VALUES (?, 'file', 'runner', 'k1', ?, ?, 1)",
        args: [id, RUN, `r2/${id}`],
      })),
    ],
    "write",
  );
});

describe("the end the host writes for a run with a flooded ledger", () => {
  it("reads a bounded number of rows, and counts its drops past the first 100", async () => {
    rowsRead = 0;
    const owed = await recordedEnd(db, job);
    expect(owed.item?.artifactRefs).toEqual([expect.objectContaining({ artifact_id: "art_kept" })]);
    const place = { conversationKey: "k1", conversationId: "C1" };
    const [count] = unauditedDropsInsert(db, { runId: RUN, runnerId: "http:tests/flood/default", place }, ledgerDrops(RUN));
    await db.batch([count!]);
    // The announcements since the last message, the run's items, the checked artifact and the count written: a handful.
    expect(rowsRead).toBeLessThan(10);
    const [written] = (await client.execute({ sql: "SELECT event_id, data_json FROM event_log WHERE run_id = ? AND json_extract(data_json, '$.ledger_seq') IS NULL", args: [RUN] })).rows;
    expect({ id: written.event_id, data: JSON.parse(String(written.data_json)) }).toEqual({
      id: `hev_drops_${RUN}`,
      data: expect.objectContaining({ suppressed: DROPS - 100, reason: expect.stringMatching(/^1400 more dropped results/) }),
    });
  });
});
