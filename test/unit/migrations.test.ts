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

  it("counts the state and storage already there, and keeps the counts exact through any statement's inserts, overwrites, moves and deletes (0027)", async () => {
    const client = createClient({ url: ":memory:" });
    await migrate(drizzle(client), { migrationsFolder: migrationsBefore("0027_runner_data_usage") });
    const run = (sql: string) => client.execute(sql);
    // Rows without an agent or a plugin service: the triggers of 0012 to 0014 let them be written.
    await run(`INSERT INTO runner_state (scope_key, key, runner_id, scope, value_json, updated_at) VALUES ('s1', 'a', 'r', 'actor', '"é"', 1), ('s1', 'b', 'r', 'actor', '[1,2]', 1), ('s2', 'a', 'r', 'actor', '0', 1)`);
    await run(`INSERT INTO storage (area, owner_key, key, value_base64, updated_at) VALUES ('workspace', 'w1', 'a', 'AAAA', 1), ('workspace', 'w1', 'b', 'AA==', 1), ('workspace', 'w2', 'a', '', 1)`);
    await migrate(drizzle(client), { migrationsFolder: "migrations" });
    const rows = async (sql: string) => (await client.execute(sql)).rows.map((r) => Object.values(r).map((v) => (typeof v === "bigint" ? Number(v) : v)));
    const expectExact = async () => {
      expect(await rows("SELECT scope_key, keys, bytes FROM runner_state_usage ORDER BY scope_key")).toEqual(
        await rows("SELECT scope_key, COUNT(*), SUM(octet_length(value_json)) FROM runner_state GROUP BY scope_key ORDER BY scope_key"),
      );
      expect(await rows("SELECT area, owner_key, keys, bytes FROM storage_usage ORDER BY area, owner_key")).toEqual(
        await rows("SELECT area, owner_key, COUNT(*), SUM(octet_length(value_base64) / 4 * 3) FROM storage GROUP BY area, owner_key ORDER BY area, owner_key"),
      );
    };
    await expectExact();
    expect(await rows("SELECT keys, bytes FROM runner_state_usage WHERE scope_key = 's1'")).toEqual([[2, 4 + 5]]);
    for (const sql of [
      `INSERT INTO runner_state (scope_key, key, runner_id, scope, value_json, updated_at) VALUES ('s1', 'a', 'r', 'actor', '"longer"', 2) ON CONFLICT DO UPDATE SET value_json = excluded.value_json`,
      "UPDATE runner_state SET scope_key = 's3' WHERE scope_key = 's2'",
      "UPDATE runner_state SET updated_at = 3",
      "DELETE FROM runner_state WHERE key = 'b'",
      "UPDATE storage SET value_base64 = 'AAAAAAAA' WHERE owner_key = 'w1' AND key = 'a'",
      "UPDATE storage SET owner_key = 'w2' WHERE owner_key = 'w1' AND key = 'b'",
      "UPDATE storage SET area = 'plugin', owner_key = 'svc' WHERE owner_key = 'w2' AND key = 'a'",
      "DELETE FROM storage WHERE owner_key = 'w1'",
    ]) {
      await run(sql);
      await expectExact();
    }
    // Scopes and areas left without keys have no row.
    expect(await rows("SELECT scope_key FROM runner_state_usage ORDER BY scope_key")).toEqual([["s1"], ["s3"]]);
    expect(await rows("SELECT area, owner_key FROM storage_usage ORDER BY area, owner_key")).toEqual([["plugin", "svc"], ["workspace", "w2"]]);
  });

  it("voids a bot's signing secret digest, installation and its key when a write that knows nothing of them changes its credentials (the previous Worker's PUT, a reseal), and only then (0031)", async () => {
    const client = createClient({ url: ":memory:" });
    await migrate(drizzle(client), { migrationsFolder: migrationsBefore("0031_bot_siblings") });
    await client.execute(`INSERT INTO bot (bot_id, platform, credentials_json, created_at, updated_at, installation_json) VALUES ('b1', 'slack', '{"bot_token":"old"}', 1, 1, '{"installation":{"team_id":"T1"}}')`);
    await migrate(drizzle(client), { migrationsFolder: "migrations" });
    const learned = async () => (await client.execute("SELECT app_secret_digest, installation_key, installation_json FROM bot WHERE bot_id = 'b1'")).rows.map((r) => Object.values(r))[0];
    // Kept by the release before: the installation stays (its key and the digest are the new Worker's to write).
    expect(await learned()).toEqual([null, null, '{"installation":{"team_id":"T1"}}']);
    await client.execute("UPDATE bot SET app_secret_digest = 'd1', installation_key = 'team:T1' WHERE bot_id = 'b1'");
    await client.execute("UPDATE bot SET name = 'renamed', updated_at = 2, credentials_json = credentials_json WHERE bot_id = 'b1'");
    expect(await learned()).toEqual(["d1", "team:T1", '{"installation":{"team_id":"T1"}}']);
    await client.execute(`UPDATE bot SET credentials_json = '{"bot_token":"new"}', updated_at = 3 WHERE bot_id = 'b1'`);
    expect(await learned()).toEqual([null, null, null]);
  });
});
