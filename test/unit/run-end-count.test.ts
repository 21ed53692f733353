import { describe, expect, it } from "vitest";
import type { EmbeddedDb } from "../../local/libsql";
import type { SqlQuery } from "../../src/db/executor";
import { recordingDbs } from "../support/recording-db";
import { runsStore, type LedgerEntry } from "../../src/stores/runs";

/**
 * A run's end counts its runner's results in its own write (result_count), on every run's hot path and holding the
 * database's lock: with up to RUN_MAX_RESULTS ledger entries it reads indexes only, never a ledger row (a row read
 * for its `origin` drags its data, up to a 1 MiB line, along). Checked on the plans SQLite makes (migrations applied).
 */
const open = recordingDbs();

/** Every step of each plan that reads run_event. */
const ledgerSteps = (e: EmbeddedDb, sent: SqlQuery[]) =>
  sent.flatMap((q) => e.rows<{ detail: string }>(`EXPLAIN QUERY PLAN ${q.sql}`, q.params).map((r) => r.detail)).filter((d) => / run_event\b/.test(d));

const entry = (runId: string, seq: number, origin: "runner" | "host"): LedgerEntry => ({ runId, seq, type: origin === "host" ? "host.warning" : "message.delta", data: { big: "x".repeat(5000) }, origin, createdAt: 1 });

describe("a run's end counting its results", () => {
  it("counts the runner's entries, not the host's, reading only indexes: its own end and the host's alike", async () => {
    const { e, db, sent, run } = await open();
    const runs = runsStore(db);
    for (const id of ["r1", "r2"]) {
      await run("INSERT INTO run (run_id, event_id, conversation_key, agent_id, runner_id, status, created_at) VALUES (?, ?, 'k', 'a', 'http:a/b/c', 'running', 1)", [id, `e-${id}`]);
      const entries = Array.from({ length: 40 }, (_, i) => entry(id, i + 1, i % 8 === 7 ? "host" : "runner"));
      for (const insert of runs.ledgerInserts(entries)) await insert.execute();
    }
    sent.length = 0;
    await runs.finishStatement("r1", { status: "completed" }).execute();
    await runs.finishAsHostStatement("r2", { status: "failed", errorCode: "host.session_lost", errorMessage: "lost" }).execute();
    expect([(await runs.get("r1"))?.resultCount, (await runs.get("r2"))?.resultCount]).toEqual([35, 35]);

    const steps = ledgerSteps(e, sent);
    expect(steps.length, "the ends read the ledger").toBeGreaterThan(0);
    expect(steps.filter((d) => !/USING COVERING INDEX/.test(d)), steps.join(" | ")).toEqual([]);
  });
});
