import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { afterEach, describe, expect, it } from "vitest";
import { migrationsBefore as migrationsBeforeIn } from "../support/old-release-db";

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The migrations folder as it stood before `tag` (same files, journal cut there). */
function migrationsBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), "migrations-"));
  dirs.push(dir);
  return migrationsBeforeIn(tag, dir);
}

describe("migrations on an existing database", () => {
  it("renames runs stored as queued to created (PROTOCOL §11) and leaves the others", async () => {
    const client = createClient({ url: ":memory:" });
    await migrate(drizzle(client), { migrationsFolder: migrationsBefore("0005_run_status_created") });
    const insert = "INSERT INTO run (run_id, event_id, conversation_key, conversation_id, agent_id, runner_id, status, created_at) VALUES (?, ?, 'k', 'c', 'a', 'http:a/b/c', ?, 1)";
    for (const [id, status] of [["r-waiting", "queued"], ["r-running", "running"], ["r-done", "completed"]]) await client.execute({ sql: insert, args: [id, `e-${id}`, status] });
    await migrate(drizzle(client), { migrationsFolder: "migrations" });
    const rows = await client.execute("SELECT run_id, status FROM run ORDER BY run_id");
    expect(rows.rows.map((r) => [r.run_id, r.status])).toEqual([["r-done", "completed"], ["r-running", "running"], ["r-waiting", "created"]]);
  });

  it("re-creates the full-text triggers to read search_text, keeping what was indexed before", async () => {
    const client = createClient({ url: ":memory:" });
    await migrate(drizzle(client), { migrationsFolder: migrationsBefore("0006_transcript_search_text") });
    const insert = "INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, content, created_at) VALUES (?, 'k', ?, 'e', 'user', 'message', ?, 1)";
    await client.execute({ sql: insert, args: ["t-old", 1, "北京开会 before"] });
    await migrate(drizzle(client), { migrationsFolder: "migrations" });
    await client.execute({ sql: insert.replace("content, created_at) VALUES (?, 'k', ?, 'e', 'user', 'message', ?, 1)", "content, search_text, created_at) VALUES (?, 'k', ?, 'e', 'user', 'message', ?, ?, 1)"), args: ["t-new", 2, "北京开会 after", " 北  京  开  会  after"] });
    const match = async (q: string) =>
      (await client.execute({ sql: "SELECT t.transcript_id FROM transcript_fts f JOIN transcript t ON t.rowid = f.rowid WHERE transcript_fts MATCH ? ORDER BY t.seq", args: [`content:(${q})`] })).rows.map((r) => r.transcript_id);
    expect(await match('"before"')).toEqual(["t-old"]);
    expect(await match('"北 京"')).toEqual(["t-new"]);
    expect(await match('"北京开会"')).toEqual(["t-old"]);
  });
});
