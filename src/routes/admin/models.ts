import * as z from "zod";
import { dbOf } from "../../db/connect";
import { notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { jsonBody, validate } from "../../middleware/validate";
import { EndpointSchema, headerValue, ResourceIdSchema } from "../../resources/ids";
import { modelsStore, toModelView } from "../../resources/models-store";
import { router } from "../app-env";
import { insertUnique } from "./unique";
import { refuseIfGranted } from "../../agents/grants-in-use";
import { model } from "../../db/schema";
import { selectPage } from "../../stores/list-page";
import { AdminListQuery, listing } from "./list-page";
import { modelSlot } from "../../stores/secret-slots";

/** An OpenAI-compatible endpoint; `base_url` is the part before `/chat/completions` (or `/rerank`). */
const ModelInput = z.strictObject({
  model_id: ResourceIdSchema.optional(),
  name: z.string().min(1).max(200),
  kind: z.enum(["llm", "rerank", "embedding"]),
  base_url: EndpointSchema,
  api_key: headerValue(4096).min(1),
  model: z.string().min(1).max(200),
  context_window: z.int().positive().optional(),
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
  .post("/", jsonBody(ModelInput), async (c) => {
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
          createdAt: Date.now(),
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
  .delete("/:modelId", async (c) => {
    const store = modelsStore(dbOf(c.env));
    const modelId = c.req.param("modelId");
    if (!(await store.get(modelId))) throw notFound(`model ${modelId} not found`);
    await refuseIfGranted(dbOf(c.env), "models", `model ${modelId}`, (id) => id === modelId);
    await store.remove(modelId);
    return c.body(null, 204);
  });
