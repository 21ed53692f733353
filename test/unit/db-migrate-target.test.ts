import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";

/**
 * README "Production": `LIBSQL_URL=… LIBSQL_AUTH_TOKEN=… npm run db:migrate` applies migrations/ to the production
 * database (drizzle.config.ts: "applies them to LIBSQL_URL"). Run without LIBSQL_URL (not exported, a new shell,
 * a CI step missing the secret), it must refuse, naming it, rather than migrate some other database and report
 * success, leaving the production one as it was until the deploy fails on a missing table.
 */
const ROOT = resolve(__dirname, "../..");
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The repository's migration setup in a folder of its own, with a developer's `.data/` as `npm start` leaves it. */
function checkout(): string {
  const dir = mkdtempSync(join(tmpdir(), "db-migrate-"));
  dirs.push(dir);
  for (const f of ["drizzle.config.ts", "package.json", "migrations", "src/db/schema.ts", "src/db/tables"]) cpSync(join(ROOT, f), join(dir, f), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  mkdirSync(join(dir, ".data"));
  return dir;
}

describe("npm run db:migrate", () => {
  it("without LIBSQL_URL refuses, naming it, and touches no database", async () => {
    const dir = checkout();
    const env = { ...process.env };
    delete env.LIBSQL_URL;
    delete env.LIBSQL_AUTH_TOKEN;
    const run = await promisify(execFile)(process.execPath, [join(ROOT, "node_modules/drizzle-kit/bin.cjs"), "migrate"], { cwd: dir, env }).then(
      (r) => ({ code: 0, out: r.stdout + r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
    );
    expect(run.code).not.toBe(0);
    expect(run.out).toMatch(/LIBSQL_URL/);
    expect(existsSync(join(dir, ".data/host.db"))).toBe(false);
  }, 60_000);

  it("with LIBSQL_URL migrates that database", async () => {
    const dir = checkout();
    const target = join(dir, "prod.db");
    await promisify(execFile)(process.execPath, [join(ROOT, "node_modules/drizzle-kit/bin.cjs"), "migrate"], { cwd: dir, env: { ...process.env, LIBSQL_URL: `file:${target}` } });
    expect(existsSync(target)).toBe(true);
    expect(existsSync(join(dir, ".data/host.db"))).toBe(false);
  }, 60_000);
});
