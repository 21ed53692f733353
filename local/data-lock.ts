import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";

/** Another live process holds the data folder: two hosts on one libSQL file and one DO store would corrupt both. */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`${dataDir} is in use by another npm start (pid ${pid})`);
    this.name = "DataDirLockedError";
  }
}

const LOCK_FILE = "host.lock";

/** Whether a process with this pid is alive (one this user may not signal still is). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Takes the data folder for this process: a lock file holding its pid,
 * created exclusively. A lock left by a process that is gone (killed, a
 * crash) is taken over. Released on `release()` and when this process exits.
 */
export function lockDataDir(dataDir: string): { release(): void } {
  const path = join(dataDir, LOCK_FILE);
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw err;
      const holder = Number(readFileSync(path, "utf8").trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) throw new DataDirLockedError(dataDir, holder);
      unlinkSync(path); // stale: its process is gone
    }
  }
  let held = true;
  const release = () => {
    if (!held) return;
    held = false;
    process.off("exit", release);
    try {
      unlinkSync(path);
    } catch {
      // already gone: nothing to release
    }
  };
  process.on("exit", release);
  return { release };
}
