import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DataDirLockedError, lockDataDir } from "../../local/data-lock";

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));
const fresh = () => (dir = mkdtempSync(join(tmpdir(), "data-lock-")));

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]);
  return Number(child.stdout.toString());
}

describe("the data folder lock of npm start", () => {
  it("is taken by one process at a time and released for the next", () => {
    const lock = lockDataDir(fresh());
    expect(readFileSync(join(dir, "host.lock"), "utf8")).toBe(String(process.pid));
    lock.release();
    expect(existsSync(join(dir, "host.lock"))).toBe(false);
    lockDataDir(dir).release();
  });

  it("refuses a folder a live process holds, naming it", () => {
    fresh();
    writeFileSync(join(dir, "host.lock"), String(process.ppid));
    const refused = (() => {
      try {
        lockDataDir(dir);
      } catch (err) {
        return err;
      }
    })();
    expect(refused).toBeInstanceOf(DataDirLockedError);
    expect((refused as DataDirLockedError).message).toBe(`${dir} is in use by another npm start (pid ${process.ppid})`);
    // The holder's lock is left as it was.
    expect(readFileSync(join(dir, "host.lock"), "utf8")).toBe(String(process.ppid));
  });

  it("takes over a lock its process left behind (killed, crashed) or that holds no pid", () => {
    for (const stale of [String(deadPid()), "", "garbage"]) {
      fresh();
      writeFileSync(join(dir, "host.lock"), stale);
      const lock = lockDataDir(dir);
      expect(readFileSync(join(dir, "host.lock"), "utf8")).toBe(String(process.pid));
      lock.release();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
