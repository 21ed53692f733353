import { readdirSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";

/** The keys each conversation's object keeps in storage (its SQLite file under a local host's `do` folder), by prefix, by file. */
export function storedKeysByObject(doDir: string): Map<string, Record<string, number>> {
  const objects = new Map<string, Record<string, number>>();
  for (const file of readdirSync(doDir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".sqlite"))) {
    const db = new Database(join(doDir, file), { readonly: true });
    try {
      if (!db.prepare("SELECT 1 FROM sqlite_master WHERE name = '_cf_KV'").get()) continue;
      const counts: Record<string, number> = {};
      for (const { key } of db.prepare("SELECT key FROM _cf_KV").all() as { key: string }[]) {
        const prefix = /^[a-z-]+:/.exec(key)?.[0] ?? key;
        counts[prefix] = (counts[prefix] ?? 0) + 1;
      }
      objects.set(file, counts);
    } finally {
      db.close();
    }
  }
  return objects;
}

/** The keys the conversations' objects keep in storage, all together, by prefix. */
export function storedKeys(doDir: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const object of storedKeysByObject(doDir).values()) for (const [prefix, n] of Object.entries(object)) counts[prefix] = (counts[prefix] ?? 0) + n;
  return counts;
}
