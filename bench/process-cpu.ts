import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second in /proc's CPU times (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** The processes this one has started, e.g. the workerd each Miniflare spawns (Linux /proc; empty elsewhere). */
export function childPids(): number[] {
  try {
    return readdirSync("/proc/self/task").flatMap((task) =>
      readFileSync(`/proc/self/task/${task}/children`, "utf8").split(" ").filter(Boolean).map(Number),
    );
  } catch {
    return [];
  }
}

/** The processes started while `start` ran. */
export async function spawnedBy<T>(start: () => Promise<T>): Promise<{ value: T; pids: number[] }> {
  const before = new Set(childPids());
  const value = await start();
  return { value, pids: childPids().filter((pid) => !before.has(pid)) };
}

/** User + system CPU the processes have used so far (ms), or null where /proc cannot tell. */
export function cpuMsOf(pids: number[]): number | null {
  if (!pids.length) return null;
  try {
    let ticks = 0;
    for (const pid of pids) {
      // Fields after the parenthesised command name; utime and stime are the 12th and 13th of them.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    }
    return (ticks * 1000) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}
