import * as z from "zod";
import { dbOf } from "../../db/connect";
import { badRequest, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { jsonBody, validate } from "../../middleware/validate";
import { EndpointSchema, headerValue, ResourceIdSchema } from "../../resources/ids";
import { knowledgeStore, toKnowledgeBaseView } from "../../resources/knowledge-store";
import { router } from "../app-env";
import { insertUnique } from "./unique";
import { checkReadAsStored, replaceOrExplain } from "./replace";
import { createdNow, nextUpdatedAt, updatedAtOf } from "../../lib/updated-at";
import { keptEndpoint, replacedKey } from "../../resources/replaced-secrets";
import { refuseIfGranted } from "../../agents/grants-in-use";
import { knowledgeBase } from "../../db/schema";
import { selectPage } from "../../stores/list-page";
import { nulFreeText } from "../../protocol/common";
import { AdminListQuery, listing } from "./list-page";
import { knowledgeBaseSlot } from "../../stores/secret-slots";

/** A retrieval endpoint: `POST {endpoint}` with `{query, top_k, filters}` answers `{entries: [{content, score, metadata?}]}`. */
const KnowledgeBaseInput = z.strictObject({
  kb_id: ResourceIdSchema.optional(),
  // Stored and compared as read back (a PUT writes only over the row as read): no NUL, at which reading cuts it short.
  name: nulFreeText().min(1).max(200),
  description: nulFreeText().max(2000).optional(),
  endpoint: EndpointSchema,
  api_key: headerValue(4096).min(1).optional(),
});

/**
 * PUT takes the body of POST, or what GET answered sent back as it is (`api_key` masked keeps the key, null removes it;
 * `created_at` is ignored; `updated_at`, when sent, must still be the stored one: checkReadAsStored).
 */
const KnowledgeBaseReplace = KnowledgeBaseInput.extend({
  api_key: headerValue(4096).min(1).nullable().optional(),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
});

export const knowledgeBasesRouter = router()
  .get("/", validate("query", AdminListQuery), (c) =>
    listing(c, c.req.valid("query"), {
      kind: "knowledge-bases",
      read: (page) => selectPage(dbOf(c.env), knowledgeBase, { time: knowledgeBase.createdAt, id: knowledgeBase.kbId }, page),
      position: (row) => ({ time: row.createdAt, id: row.kbId }),
      view: (rows) => rows.map(toKnowledgeBaseView),
    }),
  )
  .post("/", jsonBody(KnowledgeBaseInput, { exact: true }), async (c) => {
    const input = c.get("body");
    const db = dbOf(c.env);
    const store = knowledgeStore(db);
    const kbId = input.kb_id ?? newId("kb");
    const apiKey = await db.secrets.seal(input.api_key ?? null, knowledgeBaseSlot({ kbId, endpoint: input.endpoint }));
    await insertUnique(
      () =>
        store.create({
          kbId,
          name: input.name,
          description: input.description ?? null,
          endpoint: input.endpoint,
          apiKey,
          ...createdNow(),
        }),
      `knowledge base ${kbId}`,
    );
    return c.json(toKnowledgeBaseView((await store.get(kbId))!), 201);
  })
  .get("/:kbId", async (c) => {
    const row = await knowledgeStore(dbOf(c.env)).get(c.req.param("kbId"));
    if (!row) throw notFound(`knowledge base ${c.req.param("kbId")} not found`);
    return c.json(toKnowledgeBaseView(row));
  })
  // In place: its identity (created_at) is kept, so runs under way keep it; their next call reads the new definition.
  .put("/:kbId", jsonBody(KnowledgeBaseReplace, { exact: true }), async (c) => {
    const input = c.get("body");
    const db = dbOf(c.env);
    const store = knowledgeStore(db);
    const row = await store.get(c.req.param("kbId"));
    if (!row) throw notFound(`knowledge base ${c.req.param("kbId")} not found`);
    if (input.kb_id !== undefined && input.kb_id !== row.kbId) throw badRequest(`kb_id ${input.kb_id} is not the knowledge base at this path (${row.kbId})`);
    checkReadAsStored(input.updated_at, updatedAtOf(row), `knowledge base ${row.kbId}`);
    const endpoint = keptEndpoint(input.endpoint, row.endpoint);
    const apiKey = await replacedKey(db.secrets, input.api_key, row.apiKey, knowledgeBaseSlot(row), knowledgeBaseSlot({ kbId: row.kbId, endpoint }), "api_key");
    const updated = { ...row, name: input.name, description: input.description ?? null, endpoint, apiKey, updatedAt: nextUpdatedAt(updatedAtOf(row)) };
    await replaceOrExplain(() => store.replace(updated, row), row, () => store.get(row.kbId), `knowledge base ${row.kbId}`);
    return c.json(toKnowledgeBaseView(updated));
  })
  .delete("/:kbId", async (c) => {
    const store = knowledgeStore(dbOf(c.env));
    const kbId = c.req.param("kbId");
    if (!(await store.get(kbId))) throw notFound(`knowledge base ${kbId} not found`);
    await refuseIfGranted(dbOf(c.env), "knowledge_bases", `knowledge base ${kbId}`, kbId, (id) => id === kbId);
    await store.remove(kbId);
    return c.body(null, 204);
  });
