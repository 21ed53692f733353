import { createClient, type Client, type InArgs } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { sql } from "drizzle-orm";
import { beforeEach, describe, expect, it } from "vitest";
import { createDb, type Db } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { eventLog } from "../../src/db/schema";
import { ftsMatchExpression, MAX_QUERY_TERMS, searchTextOf } from "../../src/stores/fts-query";
import { transcriptInsert, transcriptStore } from "../../src/stores/transcript";
import { transcriptSearchStore } from "../../src/stores/transcript-search";

let db: Db;
let client: Client;
let statements: { sql: string; params: unknown[] }[];
beforeEach(async () => {
  client = createClient({ url: ":memory:" });
  await migrate(drizzle(client), { migrationsFolder: "migrations" });
  const executor = libsqlExecutor(client);
  statements = [];
  db = createDb({ query: (q) => (statements.push(q), executor.query(q)), batch: executor.batch });
});

let n = 0;
const item = (key: string, content: string | null, extra: { role?: string; eventId?: string } = {}) =>
  transcriptInsert(db, { transcriptId: `t${++n}`, conversationKey: key, eventId: extra.eventId ?? `e${n}`, role: extra.role ?? "user", itemType: "message", content });

const search = (key: string, text: string, opts: { roles?: string[]; eventTypes?: string[]; limit?: number } = {}) => {
  const match = ftsMatchExpression(text);
  if (!match) return Promise.resolve({ hits: [], total: 0 });
  return transcriptSearchStore(db).search(key, { match, limit: 10, ...opts });
};

describe("ftsMatchExpression", () => {
  it("quotes every word and drops words with nothing to match", () => {
    expect(ftsMatchExpression('invoice "March" NEAR(x) a*b')).toBe('"invoice" OR """March""" OR "NEAR(x)" OR "a*b"');
    expect(ftsMatchExpression("  -- ** ()  ")).toBeNull();
    expect(ftsMatchExpression("a\u0000b")).toBe('"a" OR "b"');
    const many = Array.from({ length: 100 }, (_, i) => `w${i}`).join(" ");
    expect(ftsMatchExpression(many)!.split(" OR ")).toHaveLength(MAX_QUERY_TERMS);
  });

  it("makes a word of a script written without spaces a phrase of its characters, as the index holds them", () => {
    expect(ftsMatchExpression("北京 Python教程 東京で")).toBe('"北 京" OR "Python 教 程" OR "東 京 で"');
    expect(searchTextOf("去北京开会 ok")).toBe(" 去  北  京  开  会  ok");
    expect(searchTextOf("plain text, café")).toBeNull();
    expect(searchTextOf(null)).toBeNull();
  });
});

describe("transcript full-text search on embedded libSQL", () => {
  it("indexes every transcript insert through the migration's trigger and ranks better matches first", async () => {
    await db.batch([
      item("A", "the invoice for March is attached"),
      item("A", "weather is nice"),
      item("A", "invoice invoice March overdue"),
      item("A", null),
      item("B", "an invoice in another conversation"),
    ]);
    const { hits, total } = await search("A", "march invoice");
    expect(total).toBe(2);
    expect(hits.map((h) => h.row.content)).toEqual(["invoice invoice March overdue", "the invoice for March is attached"]);
    expect(hits[0].score).toBeGreaterThan(hits[1].score);
    // Case and diacritics do not matter; another conversation never shows up.
    expect((await search("A", "WEÁTHER")).hits.map((h) => h.row.content)).toEqual(["weather is nice"]);
    expect((await search("B", "march")).total).toBe(0);
  });

  it("finds a word inside a sentence written without spaces (Chinese, Japanese, Korean, Thai), in order only", async () => {
    await db.batch([
      item("C", "我明天要去北京开会"),
      item("C", "東京で会議があります"),
      item("C", "서울에서 만나요"),
      item("C", "ไปกินข้าวกัน"),
      item("C", "用Python写一个脚本"),
      item("C", "the weather is nice"),
    ]);
    const found = async (text: string) => (await search("C", text)).hits.map((h) => h.row.content);
    expect(await found("北京")).toEqual(["我明天要去北京开会"]);
    expect(await found("会議")).toEqual(["東京で会議があります"]);
    expect(await found("서울")).toEqual(["서울에서 만나요"]);
    expect(await found("กินข้าว")).toEqual(["ไปกินข้าวกัน"]);
    expect(await found("python 脚本")).toEqual(["用Python写一个脚本"]);
    // The characters must be adjacent and in order: a phrase, not a bag of characters.
    expect(await found("京北")).toEqual([]);
    expect(await found("weather")).toEqual(["the weather is nice"]);
    // What is read back is the content as written.
    expect((await transcriptStore(db).page("C", { direction: "forward", limit: 1 })).rows[0]).not.toHaveProperty("searchText");
  });

  it("ignores accents in Greek and Cyrillic as in Latin, and keeps kana voicing marks", async () => {
    await db.batch([item("G", "Καλημέρα σας"), item("G", "Ёлка стоит в зале"), item("G", "Café au lait"), item("G", "がっこう"), item("G", "かっこう")]);
    // Text indexed before decomposition (search_text unset): a word typed as written still finds it.
    await db.run(sql`INSERT INTO transcript (transcript_id, conversation_key, event_id, role, item_type, content, artifact_refs_json, metadata_json, seq, created_at) SELECT 'legacy', 'G', 'e-legacy', 'user', 'message', 'Ευχαριστώ πολύ', '[]', '{}', 99, 1`);
    const found = async (text: string) => (await search("G", text)).hits.map((h) => h.row.content);
    expect(await found("καλημερα")).toEqual(["Καλημέρα σας"]);
    expect(await found("ΚΑΛΗΜΈΡΑ")).toEqual(["Καλημέρα σας"]);
    expect(await found("елка")).toEqual(["Ёлка стоит в зале"]);
    expect(await found("cafe")).toEqual(["Café au lait"]);
    expect(await found("ευχαριστώ")).toEqual(["Ευχαριστώ πολύ"]);
    // A voicing mark is not an accent: が is not か.
    expect(await found("がっこう")).toEqual(["がっこう"]);
    expect(searchTextOf("Ёлка")).toBe("Ёлка".normalize("NFD"));
  });

  it("keeps the index in step with updates and deletes", async () => {
    await db.batch([item("U", "alpha beta")]);
    await db.run(sql`UPDATE transcript SET content = 'gamma' WHERE conversation_key = 'U'`);
    expect((await search("U", "alpha")).total).toBe(0);
    expect((await search("U", "gamma")).total).toBe(1);
    await db.run(sql`DELETE FROM transcript WHERE conversation_key = 'U'`);
    expect((await search("U", "gamma")).total).toBe(0);
  });

  it("filters by role and by the event type of the item's event", async () => {
    await db.batch([
      db.insert(eventLog).values({ eventId: "ev-msg", eventType: "message.received", source: "api", createdAt: 1 }),
      db.insert(eventLog).values({ eventId: "ev-api", eventType: "api.invoked", source: "api", createdAt: 1 }),
      item("F", "deploy please", { eventId: "ev-msg" }),
      item("F", "deploy done", { eventId: "ev-msg", role: "assistant" }),
      item("F", "deploy via api", { eventId: "ev-api" }),
    ]);
    expect((await search("F", "deploy", { roles: ["assistant"] })).hits.map((h) => h.row.content)).toEqual(["deploy done"]);
    expect((await search("F", "deploy", { eventTypes: ["api.invoked"] })).hits.map((h) => h.row.content)).toEqual(["deploy via api"]);
    expect((await search("F", "deploy", { roles: ["user"], eventTypes: ["message.received"] })).total).toBe(1);
    const limited = await search("F", "deploy", { limit: 2 });
    expect([limited.hits.length, limited.total]).toEqual([2, 3]);
  });

  it("never fails on hostile query text", async () => {
    await db.batch([item("H", 'he said "NEAR" AND OR NOT ^col: can\'t * stop')]);
    const hostile = ['"', '""', "'", "AND", "OR NOT", "NEAR(a b, 3)", "content:he", "*", "^he", "he*", "(he", "a\u0000b", "- + :", "can't", "\\", "🙂", "'; DROP TABLE transcript; --"];
    for (const text of hostile) await expect(search("H", text)).resolves.toBeDefined();
    expect((await search("H", "can't")).total).toBe(1);
    expect((await search("H", "NEAR(")).total).toBe(1);
  });

  it("is driven by the index, asked for the conversation's rows only, never by walking the conversation", async () => {
    await db.batch([item("P", "plan me")]);
    statements = [];
    await search("P", "plan");
    const [query] = statements;
    const plan = (await client.execute({ sql: `EXPLAIN QUERY PLAN ${query.sql}`, args: query.params as InArgs })).rows.map((r) => String(r.detail));
    const ftsStep = plan.findIndex((d) => d.includes("transcript_fts"));
    expect(ftsStep).toBeGreaterThanOrEqual(0);
    expect(plan.slice(ftsStep + 1).some((d) => /SEARCH transcript USING INTEGER PRIMARY KEY/.test(d))).toBe(true);
    expect(plan.some((d) => /transcript_conversation_seq/.test(d))).toBe(false);
    expect(query.sql).toMatch(/scope:/);
  });
});
