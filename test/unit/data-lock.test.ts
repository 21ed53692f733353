import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { DataDirLockedError, lockDataDir } from "../../local/data-lock";

const dirs: string[] = [];
const holders: number[] = [];
afterEach(() => {
  for (const pid of holders.splice(0)) process.kill(pid, "SIGKILL");
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const fresh = () => {
  const dir = mkdtempSync(join(tmpdir(), "data-lock-"));
  dirs.push(dir);
  return dir;
};

/** A process that runs `code` (a module; the folder is process.argv[2]); answers its pid once it has (tsx runs it in a child of its own). */
async function holder(code: string, dir: string): Promise<{ pid: number; kill(): Promise<void> }> {
  const script = join(fresh(), "holder.mts");
  writeFileSync(script, `${code}\nconsole.log("ready " + process.pid);\nsetInterval(() => {}, 1000);\n`);
  const child = spawn(join(ROOT, "node_modules/.bin/tsx"), ["--expose-gc", script, dir], { cwd: ROOT });
  const pid = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (c) => {
      out += c;
      const ready = /ready (\d+)/.exec(out);
      if (ready) resolve(Number(ready[1]));
    });
    child.stderr!.on("data", (c) => (out += c));
    child.on("exit", (code) => reject(new Error(`holder exited ${code}: ${out}`)));
  });
  holders.push(pid);
  return {
    pid,
    async kill() {
      holders.splice(holders.indexOf(pid), 1);
      process.kill(pid, "SIGKILL");
      // Gone once it holds no file: a zombie's threads may still be closing theirs.
      while (openFiles(pid) > 0) await new Promise((r) => setTimeout(r, 20));
    },
  };
}
// Its answer is dropped and garbage collected: the lock must not go with it.
const LOCKS = `import { lockDataDir } from ${JSON.stringify(join(ROOT, "local/data-lock.ts"))};\nlockDataDir(process.argv[2]);\nglobalThis.gc();\nawait new Promise((r) => setTimeout(r, 50));\nglobalThis.gc();`;
const OPENS_A_FILE = `import { openSync } from "node:fs";\nopenSync(process.argv[2] + "/held", "w");`;

function openFiles(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0; // gone
  }
}

function refusal(dir: string): string {
  try {
    lockDataDir(dir).release();
    return "taken";
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    return err.message;
  }
}

/** The kernel lets go of a killed process's locks as its last thread exits, a moment after its files are closed. */
async function takenWithin(dir: string, ms: number): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const outcome = refusal(dir);
    if (outcome === "taken" || Date.now() > deadline) return outcome;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("the data folder lock of npm start", () => {
  it("is held by one at a time, and free again once released", () => {
    const dir = fresh();
    const lock = lockDataDir(dir);
    expect(refusal(dir)).toBe(`${dir} is in use by another npm start (pid ${process.pid}): stop it, or set DATA_DIR to another folder`);
    lock.release();
    expect(refusal(dir)).toBe("taken");
  });

  it("is refused while another process holds it, and free the moment that process is killed: a lock is never stale", async () => {
    const dir = fresh();
    const other = await holder(LOCKS, dir);
    expect(refusal(dir)).toBe(`${dir} is in use by another npm start (pid ${other.pid}): stop it, or set DATA_DIR to another folder`);
    await other.kill();
    expect(await takenWithin(dir, 2_000)).toBe("taken");
  }, 30_000);

  it("is refused while any other process has a file of the folder open (a killed npm start's workerd)", async () => {
    const dir = fresh();
    const orphan = await holder(OPENS_A_FILE, dir);
    expect(refusal(dir)).toMatch(new RegExp(`^${dir} is in use by \\S+ \\(pid ${orphan.pid}\\), perhaps left running by an npm start that was killed: stop it`));
    await orphan.kill();
    expect(await takenWithin(dir, 2_000)).toBe("taken");
  }, 30_000);
});
