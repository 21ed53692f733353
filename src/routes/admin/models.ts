import * as z from "zod";
import { dbOf } from "../../db/connect";
import { badRequest, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { jsonBody, validate } from "../../middleware/validate";
import { EndpointSchema, headerValue, ResourceIdSchema } from "../../resources/ids";
import { modelsStore, toModelView } from "../../resources/models-store";
import { router } from "../app-env";
import { insertUnique } from "./unique";
import { checkReadAsStored, replaceOrExplain } from "./replace";
import { createdNow, nextUpdatedAt, updatedAtOf } from "../../lib/updated-at";
import { keptEndpoint, replacedKey } from "../../resources/replaced-secrets";
import { refuseIfGranted } from "../../agents/grants-in-use";
import { model } from "../../db/schema";
import { selectPage } from "../../stores/list-page";
import { nulFreeText } from "../../protocol/common";
import { AdminListQuery, listing } from "./list-page";
import { modelSlot } from "../../stores/secret-slots";

/** An OpenAI-compatible endpoint; `base_url` is the part before `/chat/completions` (or `/rerank`). */
const ModelInput = z.strictObject({
  model_id: ResourceIdSchema.optional(),
  // Stored and compared as read back (a PUT writes only over the row as read): no NUL, at which reading cuts it short.
  name: nulFreeText().min(1).max(200),
  kind: z.enum(["llm", "rerank", "embedding"]),
  base_url: EndpointSchema,
  api_key: headerValue(4096).min(1),
  model: nulFreeText().min(1).max(200),
  context_window: z.int().positive().optional(),
});

/**
 * PUT takes the body of POST, or what GET answered sent back as it is (`api_key` masked keeps the key; `created_at` is
 * ignored; `updated_at`, when sent, must still be the stored one: checkReadAsStored).
 */
const ModelReplace = ModelInput.extend({
  api_key: headerValue(4096).min(1).optional(),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
});

export const modelsRouter = router()
  .get("/", validate("query", AdminListQuery), (c) =>
    listing(c, c.req.valid("query"), {
      kind: "models",
      read: (page) => selectPage(dbOf(c.env), model, { time: model.createdAt, id: model.modelId }, page),
      position: (row) => ({ time: row.createdAt, id: row.modelId }),
      view: (rows) => rows.map(toModelView),
    }),
  )
  .post("/", jsonBody(ModelInput, { exact: true }), async (c) => {
    const input = c.get("body");
    const store = modelsStore(dbOf(c.env));
    const modelId = input.model_id ?? newId("mdl");
    const apiKey = await dbOf(c.env).secrets.seal(input.api_key, modelSlot({ modelId, baseUrl: input.base_url }));
    await insertUnique(
      () =>
        store.create({
          modelId,
          name: input.name,
          kind: input.kind,
          baseUrl: input.base_url,
          apiKey,
          providerModel: input.model,
          contextWindow: input.context_window ?? null,
          ...createdNow(),
        }),
      `model ${modelId}`,
    );
    return c.json(toModelView((await store.get(modelId))!), 201);
  })
  .get("/:modelId", async (c) => {
    const row = await modelsStore(dbOf(c.env)).get(c.req.param("modelId"));
    if (!row) throw notFound(`model ${c.req.param("modelId")} not found`);
    return c.json(toModelView(row));
  })
  // In place: its identity (created_at) is kept, so runs under way keep it; their next call reads the new definition.
  .put("/:modelId", jsonBody(ModelReplace, { exact: true }), async (c) => {
    const input = c.get("body");
    const db = dbOf(c.env);
    const store = modelsStore(db);
    const row = await store.get(c.req.param("modelId"));
    if (!row) throw notFound(`model ${c.req.param("modelId")} not found`);
    if (input.model_id !== undefined && input.model_id !== row.modelId) throw badRequest(`model_id ${input.model_id} is not the model at this path (${row.modelId})`);
    // The runs granted it froze its kind's operations: another kind is another model.
    if (input.kind !== row.kind) throw badRequest(`a model's kind cannot change (${row.kind}); register a new model`);
    checkReadAsStored(input.updated_at, updatedAtOf(row), `model ${row.modelId}`);
    const baseUrl = keptEndpoint(input.base_url, row.baseUrl);
    const apiKey = await replacedKey(db.secrets, input.api_key, row.apiKey, modelSlot(row), modelSlot({ modelId: row.modelId, baseUrl }), "api_key");
    // Never null: a model always has a key, and its PUT takes none as null.
    const updated = { ...row, name: input.name, baseUrl, apiKey: apiKey!, providerModel: input.model, contextWindow: input.context_window ?? null, updatedAt: nextUpdatedAt(updatedAtOf(row)) };
    await replaceOrExplain(() => store.replace(updated, row), row, () => store.get(row.modelId), `model ${row.modelId}`);
    return c.json(toModelView(updated));
  })
  .delete("/:modelId", async (c) => {
    const store = modelsStore(dbOf(c.env));
    const modelId = c.req.param("modelId");
    if (!(await store.get(modelId))) throw notFound(`model ${modelId} not found`);
    await refuseIfGranted(dbOf(c.env), "models", `model ${modelId}`, modelId, (id) => id === modelId);
    await store.remove(modelId);
    return c.body(null, 204);
  });
