import { eq, inArray } from "drizzle-orm";
import type { Db } from "../db/client";
import { model } from "../db/schema";
import { unchanged } from "../db/unchanged";
import { iso } from "../lib/json";
import { updatedAtOf } from "../lib/updated-at";
import { MASK, maskUrl } from "./secrets";

export type ModelRow = typeof model.$inferSelect;
export type ModelKind = "llm" | "rerank" | "embedding";

/** Admin view: the API key, and what may be a credential in the base URL, are never shown. */
export function toModelView(row: ModelRow) {
  return {
    model_id: row.modelId,
    name: row.name,
    kind: row.kind as ModelKind,
    base_url: maskUrl(row.baseUrl),
    model: row.providerModel,
    context_window: row.contextWindow ?? undefined,
    api_key: MASK,
    created_at: iso(row.createdAt),
    updated_at: iso(updatedAtOf(row)),
  };
}

/** What a run may know about a model: no endpoint, no key. */
/** `createdAt`: which model of this id it is (one deleted and registered anew is another). */
const descriptorColumns = { modelId: model.modelId, name: model.name, kind: model.kind, contextWindow: model.contextWindow, createdAt: model.createdAt };
export type ModelDescriptor = { modelId: string; name: string; kind: string; contextWindow: number | null; createdAt: number };

export function modelsStore(db: Db) {
  return {
    /** With its secret: only for the host's own call to the provider. */
    get: (modelId: string) => db.select().from(model).where(eq(model.modelId, modelId)).get(),
    create: (row: typeof model.$inferInsert) => db.insert(model).values(row).run(),
    remove: (modelId: string) => db.delete(model).where(eq(model.modelId, modelId)).run(),
    /** The model as `row`, only if it is still `read`: false when it was deleted or changed meanwhile. */
    async replace(row: ModelRow, read: ModelRow): Promise<boolean> {
      const { modelId, ...rest } = row;
      return (await db.update(model).set(rest).where(unchanged(model, read)).returning({ modelId: model.modelId })).length === 1;
    },
    descriptors: (ids: string[]) => db.select(descriptorColumns).from(model).where(inArray(model.modelId, ids)),
  };
}
