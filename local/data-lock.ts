import Database from "libsql";
import { readdirSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from "node:fs";
import { join, sep } from "node:path";

/** Another process uses the data folder: two hosts on one libSQL file and one DO store would corrupt both. */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    /** Who holds it, as far as can be told: "another npm start (pid 123)", "workerd (pid 456), left running by an npm start that was killed". */
    readonly holder: string,
  ) {
    super(`${dataDir} is in use by ${holder}: stop it, or set DATA_DIR to another folder`);
    this.name = "DataDirLockedError";
  }
}

/** The lock's connections, kept reachable: one collected as garbage would be closed, and its lock let go. */
const held = new Set<InstanceType<typeof Database>>();

const LOCK_FILE = "lock.db";
const PID_FILE = "lock.pid";

/** Processes other than this one with a file under `dir` open (Linux; elsewhere none can be told). */
function otherProcessesUsing(dir: string): { pid: number; command: string }[] {
  const inside = realpathSync(dir) + sep;
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid);
  } catch {
    return [];
  }
  const found: { pid: number; command: string }[] = [];
  for (const pid of pids) {
    try {
      const fds = readdirSync(`/proc/${pid}/fd`);
      if (fds.some((fd) => safeReadlink(`/proc/${pid}/fd/${fd}`).startsWith(inside))) {
        found.push({ pid: Number(pid), command: readFileSync(`/proc/${pid}/comm`, "utf8").trim() });
      }
    } catch {
      // gone meanwhile, or not ours to look at
    }
  }
  return found;
}

const safeReadlink = (path: string) => {
  try {
    return readlinkSync(path);
  } catch {
    return "";
  }
};

/**
 * Takes the data folder for this process. The lock is an exclusive SQLite
 * transaction held open on `lock.db`: the kernel drops it when the process
 * ends however it ends (a kill, a crash), so a lock is never stale, and two
 * starts can never both take it. A killed npm start may leave its workerd
 * running on the folder's Durable Object store: any other process with a
 * file of the folder open (Linux) makes the folder in use too.
 */
export function lockDataDir(dataDir: string): { release(): void } {
  const db = new Database(join(dataDir, LOCK_FILE), { timeout: 0 });
  try {
    db.exec("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE");
  } catch (err) {
    db.close();
    if (!/locked|busy/i.test((err as Error).message)) throw err;
    let pid = "";
    try {
      pid = readFileSync(join(dataDir, PID_FILE), "utf8").trim();
    } catch {
      // the holder has not written it yet
    }
    throw new DataDirLockedError(dataDir, pid ? `another npm start (pid ${pid})` : "another npm start");
  }
  held.add(db);
  const release = () => {
    held.delete(db);
    if (db.open) db.close();
  };
  const others = otherProcessesUsing(dataDir);
  if (others.length) {
    release();
    const { pid, command } = others[0]!;
    throw new DataDirLockedError(dataDir, `${command} (pid ${pid}), perhaps left running by an npm start that was killed`);
  }
  writeFileSync(join(dataDir, PID_FILE), String(process.pid));
  return { release };
}
