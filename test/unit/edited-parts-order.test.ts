import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { beforeAll, describe, expect, it } from "vitest";
import { createDb, type Db } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { replacedArtifactIds } from "../../src/stores/recalled-files";
import { transcriptRevisionStatement } from "../../src/stores/transcript-revision";

/**
 * An edit that replaces one of a message's files (a Telegram photo swapped) leaves the others in its transcript item's
 * parts and refs in the order the message had them: history.page shows later runs the message as its user left it.
 * The list is rebuilt in SQL (an aggregate over json_each), whose input order SQLite leaves undefined unless the
 * aggregate names it. A regression guard: the SQLite we run yields json_each's order either way.
 */
let db: Db;
let client: Client;
const FILES = 12;
const REPLACED = 5;
const ids = Array.from({ length: FILES }, (_, i) => `art_${String(FILES - i).padStart(2, "0")}`);
const message = { botId: "B1", registeredAt: 0, conversationId: "C1", messageRef: "m1" };

beforeAll(async () => {
  client = createClient({ url: ":memory:" });
  await migrate(drizzle(client), { migrationsFolder: "migrations" });
  db = createDb(libsqlExecutor(client));
  // The ids descend as the message's files go: any order but the parts' own shows.
  const parts = [{ type: "text", text: "look" }, ...ids.map((artifact_id) => ({ type: "image", artifact_id }))];
  const refs = ids.map((artifact_id) => ({ artifact_id, artifact_type: "image" }));
  await client.batch(
    [
      {
        sql: "INSERT INTO event_log (event_id, event_type, source, bot_id, conversation_key, conversation_id, message_ref, input_json, created_at) VALUES ('ev1', 'message.received', 'telegram', 'B1', 'k1', 'C1', 'm1', ?, 1)",
        args: [JSON.stringify({ text: "look", attachments: refs })],
      },
      {
        sql: "INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, role, item_type, content, content_json, artifact_refs_json, created_at) VALUES ('tr1', 'k1', 1, 'ev1', 'user', 'message', 'look', ?, ?, 1)",
        args: [JSON.stringify(parts), JSON.stringify(refs)],
      },
      ...ids.map((id) => ({
        sql: "INSERT INTO artifact (artifact_id, artifact_type, source, conversation_key, r2_key, metadata_json, created_at) VALUES (?, 'image', 'input', 'k1', ?, ?, 1)",
        args: [id, `r2/${id}`, JSON.stringify({ event_id: "ev1", platform_file_id: `file-${id}` })],
      })),
    ],
    "write",
  );
});

describe("an edit that replaces one of a message's many files", () => {
  it("keeps the other parts and refs in the message's order", async () => {
    const kept = ids.filter((_, i) => i !== REPLACED).map((id) => `file-${id}`);
    const edit = { ...message, eventId: "ev2", edit: { text: "look again", version: 2 } };
    await transcriptRevisionStatement(db, edit, "2026-01-01T00:00:00.000Z", replacedArtifactIds(db, message, kept)).all();
    const [row] = (await client.execute("SELECT content_json, artifact_refs_json FROM transcript WHERE transcript_id = 'tr1'")).rows;
    const left = ids.filter((_, i) => i !== REPLACED);
    const parts = JSON.parse(String(row.content_json)) as { type: string; text?: string; artifact_id?: string }[];
    expect(parts.map((p) => p.text ?? p.artifact_id)).toEqual(["look again", ...left]);
    expect((JSON.parse(String(row.artifact_refs_json)) as { artifact_id: string }[]).map((r) => r.artifact_id)).toEqual(left);
  });
});
