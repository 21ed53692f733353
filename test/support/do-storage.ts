import { readdirSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";

/** The keys the conversations' objects keep in storage (their SQLite files under a local host's `do` folder), by prefix. */
export function storedKeys(doDir: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const file of readdirSync(doDir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".sqlite"))) {
    const db = new Database(join(doDir, file), { readonly: true });
    try {
      if (!db.prepare("SELECT 1 FROM sqlite_master WHERE name = '_cf_KV'").get()) continue;
      for (const { key } of db.prepare("SELECT key FROM _cf_KV").all() as { key: string }[]) {
        const prefix = /^[a-z-]+:/.exec(key)?.[0] ?? key;
        counts[prefix] = (counts[prefix] ?? 0) + 1;
      }
    } finally {
      db.close();
    }
  }
  return counts;
}
