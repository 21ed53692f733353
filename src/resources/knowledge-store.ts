import { eq, inArray } from "drizzle-orm";
import type { Db } from "../db/client";
import { knowledgeBase } from "../db/schema";
import { unchanged } from "../db/unchanged";
import { iso } from "../lib/json";
import { updatedAtOf } from "../lib/updated-at";
import { MASK, maskUrl } from "./secrets";

export type KnowledgeBaseRow = typeof knowledgeBase.$inferSelect;

/** Admin view: the API key, and what may be a credential in the endpoint, are never shown. */
export function toKnowledgeBaseView(row: KnowledgeBaseRow) {
  return {
    kb_id: row.kbId,
    name: row.name,
    description: row.description ?? undefined,
    endpoint: maskUrl(row.endpoint),
    api_key: row.apiKey ? MASK : null,
    created_at: iso(row.createdAt),
    updated_at: iso(updatedAtOf(row)),
  };
}

/** `createdAt`: which knowledge base of this id it is (one deleted and registered anew is another). */
const descriptorColumns = { kbId: knowledgeBase.kbId, name: knowledgeBase.name, description: knowledgeBase.description, createdAt: knowledgeBase.createdAt };
export type KnowledgeBaseDescriptor = { kbId: string; name: string; description: string | null; createdAt: number };

export function knowledgeStore(db: Db) {
  return {
    /** With its secret: only for the host's own call to the endpoint. */
    get: (kbId: string) => db.select().from(knowledgeBase).where(eq(knowledgeBase.kbId, kbId)).get(),
    create: (row: typeof knowledgeBase.$inferInsert) => db.insert(knowledgeBase).values(row).run(),
    remove: (kbId: string) => db.delete(knowledgeBase).where(eq(knowledgeBase.kbId, kbId)).run(),
    /** The knowledge base as `row`, only if it is still `read`: false when it was deleted or changed meanwhile. */
    async replace(row: KnowledgeBaseRow, read: KnowledgeBaseRow): Promise<boolean> {
      const { kbId, ...rest } = row;
      return (await db.update(knowledgeBase).set(rest).where(unchanged(knowledgeBase, read)).returning({ kbId: knowledgeBase.kbId })).length === 1;
    },
    descriptors: (ids: string[]) => db.select(descriptorColumns).from(knowledgeBase).where(inArray(knowledgeBase.kbId, ids)),
  };
}
