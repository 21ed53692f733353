import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { lockDataDir } from "../../local/data-lock";

/**
 * `npm start` checks what it is given before starting anything: a port
 * already in use, or a PORT that is not a port, is one clear line naming the
 * variable and a non-zero exit, never a stack trace from deep inside. So is
 * a data folder another npm start is using.
 */
const dirs: string[] = [];
const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) await new Promise((r) => s.close(r));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function occupy(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as { port: number }).port;
}

/** Run `npm start`'s script until it exits, or until its output matches `until` (then it is stopped, `lingerMs` later). */
function start(env: Record<string, string>, dataDir = mkdtempSync(join(tmpdir(), "npm-start-ports-")), until?: RegExp, lingerMs = 0): Promise<{ code: number | null; output: string }> {
  dirs.push(dataDir);
  return new Promise((resolve) => {
    // As `npm start` runs it: node itself, so a SIGTERM reaches the script (tsx's CLI would SIGKILL a busy one, leaving workerd behind).
    const child = spawn(process.execPath, ["--import", "tsx", "local/start.ts"], { cwd: ROOT, env: { ...process.env, DATA_DIR: dataDir, ...env } });
    let output = "";
    let stopping = false;
    const onData = (chunk: Buffer) => {
      output += chunk;
      // One signal: a second one, during the orderly stop, would end it at once.
      if (!stopping && until?.test(output)) {
        stopping = true;
        setTimeout(() => child.killed || child.kill("SIGTERM"), lingerMs);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    const timer = setTimeout(() => child.killed || child.kill("SIGTERM"), 45_000);
    child.on("exit", (code) => (clearTimeout(timer), resolve({ code, output })));
  });
}

const clear = (output: string) => ({ stackFrames: output.split("\n").filter((l) => /^\s+at |kj::Exception/.test(l)).length, mentionsVariable: /\b(RUNNER_)?PORT\b/.test(output) });

describe("npm start with a port it cannot use", () => {
  it("PORT in use: one clear line naming PORT, no stack trace", async () => {
    const port = await occupy();
    const { code, output } = await start({ PORT: String(port), RUNNER_PORT: "0" });
    expect(code).not.toBe(0);
    expect(clear(output)).toEqual({ stackFrames: 0, mentionsVariable: true });
  }, 60_000);

  it("RUNNER_PORT in use: one clear line naming RUNNER_PORT, no stack trace", async () => {
    const port = await occupy();
    const { code, output } = await start({ PORT: "0", RUNNER_PORT: String(port) });
    expect(code).not.toBe(0);
    expect(clear(output)).toEqual({ stackFrames: 0, mentionsVariable: true });
  }, 60_000);

  it("PORT that is not a port: one clear line naming PORT", async () => {
    const { code, output } = await start({ PORT: "abc", RUNNER_PORT: "0" });
    expect(code).not.toBe(0);
    expect(clear(output)).toEqual({ stackFrames: 0, mentionsVariable: true });
    expect(output).toMatch(/PORT=abc is not a port/);
  }, 60_000);

  it("PORT and RUNNER_PORT the same (each free on its own): one clear line naming both", async () => {
    const port = await occupy();
    await new Promise((r) => servers.pop()!.close(r));
    const { code, output } = await start({ PORT: String(port), RUNNER_PORT: String(port) });
    expect(code).not.toBe(0);
    expect(clear(output)).toEqual({ stackFrames: 0, mentionsVariable: true });
    expect(output).toMatch(/PORT and RUNNER_PORT are both/);
  }, 60_000);
});

describe("npm start with settings it refuses", () => {
  it("lists every problem and exits 1 before making anything: no data folder, dev token or key is left behind", async () => {
    const parent = mkdtempSync(join(tmpdir(), "npm-start-settings-"));
    const dataDir = join(parent, "data");
    const { code, output } = await start({ PORT: "0", RUNNER_PORT: "0", ALBUM_WAIT_MS: "20000", DELIVERY_MAX_PARTS: "1", ADMIN_TOKEN: "short" }, dataDir);
    expect(code).toBe(1);
    expect(output).toMatch(/npm start: the configuration is not valid:/);
    for (const name of ["ALBUM_WAIT_MS", "DELIVERY_MAX_PARTS", "ADMIN_TOKEN"]) expect(output).toContain(name);
    expect(output).not.toContain("short");
    expect(clear(output).stackFrames).toBe(0);
    expect(existsSync(dataDir)).toBe(false);
    rmSync(parent, { recursive: true, force: true });
  }, 60_000);

  it("a data folder whose token and key files hold none (edited by hand): exits 1 naming each file, never serving on them", async () => {
    // Checked before the folder's files are read with stand-ins in their place, then as read: a host started on them
    // would answer every request 503 misconfigured.
    const dataDir = mkdtempSync(join(tmpdir(), "npm-start-edited-"));
    writeFileSync(join(dataDir, "secrets-key"), "my own key, see the wiki\n");
    writeFileSync(join(dataDir, "admin-token"), "hand edited token\n");
    // Blank counts as unset: the folder's files are the ones read, whatever this process's environment holds.
    const { code, output } = await start({ PORT: "0", RUNNER_PORT: "0", ADMIN_TOKEN: "", SECRETS_KEY: "", SECRETS_KEY_PREVIOUS: "" }, dataDir, /listening on/);
    expect(code).toBe(1);
    expect(output).not.toMatch(/listening on/);
    expect(output).toMatch(new RegExp(`^  ADMIN_TOKEN: .* \\(the token in ${join(dataDir, "admin-token")}: correct it, or delete it and a new one is made\\)$`, "m"));
    expect(output).toMatch(new RegExp(`^  SECRETS_KEY: .* \\(the key in ${join(dataDir, "secrets-key")}, which sealed nothing: correct it, or delete it and a new one is made\\)$`, "m"));
    // The token is a secret even when wrong; so, once corrected, is the key.
    expect(output).not.toContain("hand edited token");
    expect(output).not.toContain("see the wiki");
    expect(clear(output).stackFrames).toBe(0);
  }, 60_000);
});

describe("npm start on a data folder another one is using", () => {
  it("one clear line naming the folder and the process holding it, and the holder's files untouched", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "npm-start-locked-"));
    // This test process stands for the npm start already running there.
    const lock = lockDataDir(dataDir);
    try {
      const before = readdirSync(dataDir).sort();
      const { code, output } = await start({ PORT: "0", RUNNER_PORT: "0" }, dataDir);
      expect(code).not.toBe(0);
      expect(output).toContain(`npm start: ${dataDir} is in use by another npm start (pid ${process.pid}): stop it, or set DATA_DIR to another folder`);
      expect(clear(output).stackFrames).toBe(0);
      expect(readdirSync(dataDir).sort()).toEqual(before);
    } finally {
      lock.release();
    }
  }, 60_000);
});

describe("npm start with ADMIN_TOKEN and SECRETS_KEY set blank", () => {
  it("counts them as unset, as every other blank variable: a dev token is made and printed, credentials are sealed with the dev key", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "npm-start-blank-"));
    const { code, output } = await start({ PORT: "0", RUNNER_PORT: "0", ADMIN_TOKEN: "   ", SECRETS_KEY: "  " }, dataDir, /admin token: [0-9a-f]{48}\b/);
    expect(output).not.toMatch(/configuration is not valid/);
    expect(output).toMatch(/admin token: [0-9a-f]{48}\b/);
    expect(output).toMatch(/bound globally as agent "echo"/);
    // Stopped by SIGTERM right after it started: its own orderly stop ran (exit 0), workerd went with it, so nothing holds the folder any more.
    expect(code).toBe(0);
    lockDataDir(dataDir).release();
    const db = createClient({ url: `file:${join(dataDir, "host.db")}` });
    try {
      expect(existsSync(join(dataDir, "secrets-key"))).toBe(true);
      expect((await db.execute("SELECT secret FROM runner_service")).rows.map((r) => String(r.secret).slice(0, 7))).toEqual(["sealed:"]);
    } finally {
      db.close();
    }
  }, 60_000);
});

/** A migrated host.db whose "deleted owners" table is gone, so that retention step fails; made in a process of its own, which keeps no file of the folder open. */
async function withFailingRetention(dataDir: string): Promise<void> {
  const script = `
    const file = process.argv[1];
    const { openEmbeddedDb } = await import("./local/libsql.ts");
    (await openEmbeddedDb("file:" + file)).close();
    const { default: Database } = await import("libsql");
    const db = new Database(file);
    db.exec("ALTER TABLE deleted_owner RENAME TO deleted_owner_gone");
    db.close();`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script, join(dataDir, "host.db")], { cwd: ROOT });
  let output = "";
  child.stderr.on("data", (c) => (output += c));
  const code = await new Promise((r) => child.on("exit", r));
  if (code !== 0) throw new Error(`preparing host.db failed: ${output}`);
}

describe("npm start with ADMIN_TOKEN set, and a retention sweep that fails", () => {
  it("prints not the operator's token but where it is, and the sweep's failure once, as the Worker says it", async () => {
    const token = "operator-chosen-admin-token-5f3e9a";
    const dataDir = mkdtempSync(join(tmpdir(), "npm-start-own-token-"));
    await withFailingRetention(dataDir);
    // Left running a while after the Worker's line: long enough for any other line about the same sweep.
    const { code, output } = await start({ PORT: "0", RUNNER_PORT: "0", ADMIN_TOKEN: token }, dataDir, /^retention failed: steps failed: deleted owners/m, 1500);
    expect(output).toMatch(/^admin token: from ADMIN_TOKEN$/m);
    expect(output).toContain('-H "Authorization: Bearer $ADMIN_TOKEN"');
    expect(output).not.toContain(token);
    expect(output.match(/retention failed/g)).toHaveLength(1);
    expect(code).toBe(0);
  }, 60_000);
});
