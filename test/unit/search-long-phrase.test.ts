import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { beforeEach, describe, expect, it } from "vitest";
import { createDb, type Db } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { ftsMatchExpression } from "../../src/stores/fts-query";
import { transcriptInsert } from "../../src/stores/transcript";
import { transcriptSearchStore } from "../../src/stores/transcript-search";

let db: Db;
let client: Client;
beforeEach(async () => {
  client = createClient({ url: ":memory:" });
  await migrate(drizzle(client), { migrationsFolder: "migrations" });
  db = createDb(libsqlExecutor(client));
});
let n = 0;
const item = (key: string, content: string) => transcriptInsert(db, { transcriptId: `t${++n}`, conversationKey: key, eventId: `e${n}`, role: "user", itemType: "message", content });
const search = (key: string, text: string) => transcriptSearchStore(db).search(key, { match: ftsMatchExpression(text)!, limit: 10 });
/** Tokens FTS5 reads in a MATCH expression, counted as unicode61 splits (every non letter/number is a separator). */
const tokens = (expr: string) => expr.match(/[\p{L}\p{N}]+/gu)?.length ?? 0;

describe("history.search query cost is bounded whatever one word holds", () => {
  it("a word of thousands of tokens (punctuation inside, or a script without spaces) is not a phrase of thousands of tokens", () => {
    // The query may be 64 KiB; MAX_QUERY_TERMS bounds words, and each word's phrase must be bounded too.
    expect(tokens(ftsMatchExpression("x.".repeat(32_000))!)).toBeLessThanOrEqual(64);
    expect(tokens(ftsMatchExpression("北".repeat(60_000))!)).toBeLessThanOrEqual(64);
    expect(tokens(ftsMatchExpression(Array.from({ length: 32 }, (_, i) => `w${i}.`.repeat(500)).join(" "))!)).toBeLessThanOrEqual(32 * 64);
  });

  it("a 64 KiB unspaced word still finds the message holding it", async () => {
    const huge = "x.".repeat(32_000);
    await db.batch([item("A", huge), item("A", "unrelated")]);
    const { hits } = await search("A", huge);
    expect(hits.map((h) => h.row.content)).toEqual([huge]);
  }, 60_000);

  it("a cut phrase still matches its start, and a run of letters longer than the cap as a prefix", async () => {
    const long = `${"a".repeat(100)}`;
    const words = Array.from({ length: 30 }, (_, i) => `part${i}`).join("-");
    const cjk = "我明天要去北京开会".repeat(12);
    await db.batch([item("B", `id ${long} here`), item("B", words), item("B", cjk), item("B", `${"a".repeat(70)}b`)]);
    expect((await search("B", long)).hits.map((h) => h.row.content)).toContain(`id ${long} here`);
    expect((await search("B", words)).hits.map((h) => h.row.content)).toEqual([words]);
    expect((await search("B", cjk)).hits.map((h) => h.row.content)).toEqual([cjk]);
    for (const odd of [`${"(".repeat(200)}word`, `"${"a\"".repeat(100)}`, `${"🙂".repeat(40)}x${"🙂".repeat(40)}`, `${"é".repeat(80)}`]) {
      await expect(search("B", odd), odd).resolves.toBeDefined();
    }
  });
});
