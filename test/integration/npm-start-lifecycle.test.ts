import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";

/**
 * README "Two commands": npm start registers the example runner and binds it globally as agent `echo` the first
 * time; Ctrl-C or SIGTERM stops it in order (exit code 0); configuration problems are one clear line.
 */
const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  // npm start's own process group: its workerd, and whatever a failed stop left running.
  for (const c of children) if (c.spawnargs.includes("local/start.ts") || c.spawnargs[0] === "npm") try { process.kill(-c.pid!, "SIGKILL"); } catch { /* not a group of its own, or gone */ }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const fresh = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};

/** `detached`: in a process group of its own, as a terminal's foreground job is (signalled as -pid). `viaNpm`: `npm start` itself. */
function start(env: Record<string, string>, detached = false, viaNpm = false) {
  const [command, args] = viaNpm ? ["npm", ["start", "--silent"]] : [process.execPath, ["--import", "tsx", "local/start.ts"]];
  const child = spawn(command, args, { cwd: ROOT, detached, env: { ...process.env, PORT: "0", RUNNER_PORT: "0", ...env } });
  children.push(child);
  let output = "";
  child.stdout!.on("data", (c) => (output += c));
  child.stderr!.on("data", (c) => (output += c));
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) => child.on("exit", (code, signal) => r({ code, signal })));
  const timer = setTimeout(() => child.kill("SIGKILL"), 50_000);
  void exited.then(() => clearTimeout(timer));
  const ready = async () => {
    for (;;) {
      const m = /listening on (\S+)\nadmin token: (\S+)/.exec(output);
      if (m) return { url: m[1]!, token: m[2]!, output: () => `${child.exitCode !== null || child.signalCode !== null ? `(exited: ${child.exitCode ?? child.signalCode}) ` : ""}${output}` };
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`npm start exited: ${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { child, exited, ready, output: () => output };
}

/**
 * Wait until the example runner's service is registered in the data folder's libSQL file (and not longer); answers
 * how many agents there were then. Watched from a process of its own: libSQL's native driver keeps a closed
 * database's files open while its statements live, and npm start refuses a folder another process has open.
 * The file is opened once its WAL has frames: npm start then has it in WAL mode, where a reader never holds a lock
 * its writes need. Before, a read here could hold the lock npm start's `PRAGMA journal_mode = WAL` needs on the new
 * file (no busy timeout): npm start died of SQLITE_BUSY and this waited until the test's timeout. (libsql ignores
 * `readonly`: the connection is read-write whatever is asked.) A start that exits first fails the wait at once.
 */
async function untilRunnerRegistered(dataDir: string, started?: { exited: Promise<unknown>; output(): string }): Promise<number> {
  const watcher = `
    const { existsSync, statSync } = require("node:fs");
    const Database = require("libsql");
    const file = process.argv[1] + "/host.db";
    let db;
    for (;;) {
      if (!db && existsSync(file + "-wal") && statSync(file + "-wal").size > 0) db = new Database(file);
      try {
        if (db && db.prepare("SELECT count(*) AS n FROM runner").get().n > 0) {
          process.stdout.write(String(db.prepare("SELECT count(*) AS n FROM agent").get().n));
          process.exit(0);
        }
      } catch {}
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
    }`;
  const child = spawn(process.execPath, ["-e", watcher, dataDir], { cwd: ROOT });
  children.push(child);
  let out = "";
  child.stdout!.on("data", (c) => (out += c));
  child.stderr!.on("data", (c) => (out += c));
  const watched = new Promise<number | null>((r) => child.on("exit", r));
  const code = await (started ? Promise.race([watched, started.exited.then(() => "start exited" as const)]) : watched);
  if (code === "start exited") {
    child.kill("SIGKILL");
    throw new Error(`npm start exited before registering the example: ${started!.output()}`);
  }
  if (code !== 0) throw new Error(`watcher failed: ${out}`);
  return Number(out);
}

/** A call to a started host; one that cannot reach it says what npm start printed, and whether it is still running. */
const call = async (h: { url: string; token: string; output?: () => string }, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${h.url}${path}`, { method, headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }).catch((err: Error) => {
    throw new Error(`${method} ${path}: ${err.message} (${(err.cause as Error | undefined)?.message ?? "no cause"}); npm start printed:\n${h.output?.() ?? ""}`, { cause: err });
  });
  return { status: res.status, body: (await res.json().catch(() => null)) as any };
};

describe("npm start with a DATA_DIR it cannot use", () => {
  it("DATA_DIR naming a file: one clear line naming DATA_DIR, no stack trace", async () => {
    const file = join(fresh("npm-start-datadir-"), "not-a-folder");
    writeFileSync(file, "x");
    const s = start({ DATA_DIR: file });
    const { code } = await s.exited;
    expect(code).not.toBe(0);
    expect(s.output().split("\n").filter((l) => /^\s+at /.test(l))).toEqual([]);
    expect(s.output()).toMatch(/^npm start: .*DATA_DIR/m);
  }, 60_000);
});

describe("a first npm start stopped while it was starting", () => {
  it("watching for the registration never holds host.db while npm start makes it: its switch to WAL gets the file at once", async () => {
    const dataDir = fresh("npm-start-watcher-");
    // As npm start's openEmbeddedDb begins: the file made, not yet in WAL mode.
    const db = new Database(join(dataDir, "host.db"));
    const registered = untilRunnerRegistered(dataDir);
    // `PRAGMA journal_mode = WAL` needs the file exclusively and waits for no one: that lock, taken over and over while the watcher polls.
    let refused = 0;
    for (const end = Date.now() + 2000; Date.now() < end && !refused; ) {
      try {
        db.exec("BEGIN EXCLUSIVE");
        db.exec("ROLLBACK");
      } catch {
        refused++;
      }
    }
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("CREATE TABLE runner (runner_id TEXT); CREATE TABLE agent (agent_id TEXT); INSERT INTO runner VALUES ('r')");
    try {
      expect({ refused, agents: await registered }).toEqual({ refused: 0, agents: 0 });
    } finally {
      db.close();
    }
  }, 30_000);

  it("SIGTERM after registering the example runner, before binding it: the start completes, so the next start has agent echo", async () => {
    const dataDir = fresh("npm-start-first-");
    const first = start({ DATA_DIR: dataDir });
    const agentsThen = await untilRunnerRegistered(dataDir, first);
    first.child.kill("SIGTERM");
    await first.exited;
    expect(agentsThen).toBe(0);

    const second = start({ DATA_DIR: dataDir });
    try {
      const h = await second.ready();
      const sent = await call(h, "POST", "/v1/events", { event_type: "message.received", conversation_id: "c1", actor: { actor_type: "user", actor_id: "u1" }, input: { text: "hello" } });
      expect({ agent: (await call(h, "GET", "/v1/admin/agents/echo")).status, disposition: sent.body.disposition }).toEqual({ agent: 200, disposition: "started" });
    } finally {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  }, 90_000);

  it("Ctrl-C (SIGINT to the whole process group, workerd included) after registering the example: the next start binds agent echo", async () => {
    const dataDir = fresh("npm-start-ctrlc-");
    const first = start({ DATA_DIR: dataDir }, true);
    await untilRunnerRegistered(dataDir, first);
    process.kill(-first.child.pid!, "SIGINT");
    expect(await first.exited).toEqual({ code: 0, signal: null });
    const second = start({ DATA_DIR: dataDir }, true);
    try {
      const h = await second.ready();
      expect((await call(h, "GET", "/v1/admin/agents/echo")).status).toBe(200);
    } finally {
      process.kill(-second.child.pid!, "SIGTERM");
      await second.exited;
    }
  }, 90_000);

  it("SIGTERM while it starts (the Worker up, the example not yet bound) stops it in order: exit code 0", async () => {
    const dataDir = fresh("npm-start-early-term-");
    const s = start({ DATA_DIR: dataDir });
    await untilRunnerRegistered(dataDir, s);
    s.child.kill("SIGTERM");
    expect(await s.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});

describe("npm start after its first start", () => {
  it("leaves the example as the operator left it: agent echo and its service deleted stay deleted", async () => {
    const dataDir = fresh("npm-start-echo-deleted-");
    const first = start({ DATA_DIR: dataDir });
    const h1 = await first.ready();
    expect((await call(h1, "DELETE", "/v1/admin/agents/echo")).status).toBe(200);
    const services = (await call(h1, "GET", "/v1/admin/runner-services")).body.items as { service_id: string }[];
    for (const s of services) expect((await call(h1, "DELETE", `/v1/admin/runner-services/${s.service_id}`)).status).toBe(204);
    first.child.kill("SIGTERM");
    expect((await first.exited).code).toBe(0);

    const second = start({ DATA_DIR: dataDir });
    try {
      const h2 = await second.ready();
      expect((await call(h2, "GET", "/v1/admin/agents/echo")).status).toBe(404);
      expect((await call(h2, "GET", "/v1/admin/runner-services")).body.items).toEqual([]);
      expect(second.output()).toMatch(/agent "echo" as you left it/);
    } finally {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  }, 90_000);
});

describe("npm start stopped by a supervisor", () => {
  it("SIGTERM to the npm process itself (docker stop, systemd) stops the host in order: exit 0, nothing left answering", async () => {
    const s = start({ DATA_DIR: fresh("npm-start-npm-term-") }, true, true);
    const h = await s.ready();
    s.child.kill("SIGTERM");
    expect((await s.exited).code).toBe(0);
    // Before, npm's shell died alone and node with its workerd went on serving.
    const after = await fetch(`${h.url}/healthz`).then((r) => r.status, () => "refused");
    expect(after).toBe("refused");
  }, 90_000);
});

describe("npm start stopped from its terminal", () => {
  it("Ctrl-C on `npm start` in a terminal (SIGINT to npm, node and workerd; npm sends node its own too) stops it in order: exit 0", async () => {
    const dataDir = fresh("npm-start-npm-ctrlc-");
    const s = start({ DATA_DIR: dataDir }, true, true);
    await s.ready();
    process.kill(-s.child.pid!, "SIGINT");
    // Before, node took npm's copy of the one Ctrl-C for a second one and exited at once (1), its data lock held.
    expect(await s.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(join(dataDir, "lock.db-journal"))).toBe(false);
    // Everything is in host.db itself, its write-ahead log folded in: a copy of that one file is a whole backup.
    const wal = join(dataDir, "host.db-wal");
    expect(existsSync(wal) ? statSync(wal).size : 0).toBe(0);
    const backup = join(fresh("npm-start-backup-"), "host.db");
    copyFileSync(join(dataDir, "host.db"), backup);
    const copy = new Database(backup, { readonly: true });
    expect((copy.prepare("SELECT count(*) AS n FROM agent WHERE agent_id = 'echo'").get() as { n: number }).n).toBe(1);
    copy.close();
  }, 90_000);
});
