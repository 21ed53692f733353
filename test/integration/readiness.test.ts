import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { startTestHost, type TestHost } from "../support/host";

/** `GET /readyz` answers for the deployment as an uptime check sees it: no token, no body to send. */
const journal = JSON.parse(readFileSync(join(ROOT, "migrations/meta/_journal.json"), "utf8")) as { entries: { tag: string; when: number }[] };
const newest = journal.entries[journal.entries.length - 1]!;

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost({ captureLogs: true });
});
afterAll(async () => {
  await host?.dispose();
});

const ready = async () => {
  const res = await fetch(`${host.url}/readyz`);
  return { status: res.status, body: (await res.json()) as { ok?: true; migration?: string; host_version?: string; error?: { code: string; message: string } } };
};

describe("GET /readyz", () => {
  it("answers 200 with the migration the database is at when it is migrated and answers", async () => {
    expect(await ready()).toEqual({ status: 200, body: { ok: true, host_version: "0.1.0", migration: newest.tag } });
  });

  it("answers 503 database_not_migrated naming both migrations while the newest is not applied, and 200 once it is", async () => {
    // Both migrators key rows by `created_at` (drizzle's sqlite-proxy migrator leaves `id` null).
    const [applied] = await host.query<{ hash: string }>("SELECT hash FROM __drizzle_migrations WHERE created_at = ?", [newest.when]);
    expect(applied).toBeDefined();
    await host.query("DELETE FROM __drizzle_migrations WHERE created_at = ?", [newest.when]);
    try {
      const previous = journal.entries[journal.entries.length - 2]!;
      const res = await ready();
      expect(res.status).toBe(503);
      expect(res.body.error?.code).toBe("database_not_migrated");
      expect(res.body.error?.message).toContain(`its newest migration is ${previous.tag}, this version needs ${newest.tag}`);
      expect(res.body.error?.message).toContain("npm run db:migrate");
      // Liveness is another question: the Worker runs.
      expect((await fetch(`${host.url}/healthz`)).status).toBe(200);
    } finally {
      await host.query("INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)", [applied!.hash, newest.when]);
    }
    expect((await ready()).status).toBe(200);
  });

  it("answers 503 database_unavailable while the database does not answer, and 200 when it is back", async () => {
    host.databaseOutage({ queries: 1, matching: "__drizzle_migrations" });
    const res = await ready();
    expect(res.status).toBe(503);
    expect(res.body.error).toEqual({ code: "database_unavailable", message: expect.stringMatching(/^the database is unavailable \(/) });
    expect((await ready()).status).toBe(200);
  });
});
