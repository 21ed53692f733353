import * as z from "zod";
import { dbOf } from "../../db/connect";
import { badRequest, conflict, notFound } from "../../lib/errors";
import { sealValues } from "../../lib/secret-box";
import { nulFreeText, RecordSchema } from "../../protocol/common";
import { jsonBody, validate } from "../../middleware/validate";
import { EndpointSchema, HeadersSchema, ToolNameSchema } from "../../resources/ids";
import { schemaProblems } from "../../resources/json-schema-problems";
import { toolsStore, toToolView } from "../../resources/tools-store";
import { router } from "../app-env";
import { insertUnique } from "./unique";
import { checkReadAsStored, replaceOrExplain } from "./replace";
import { createdNow, nextUpdatedAt, updatedAtOf } from "../../lib/updated-at";
import { keptEndpoint, replacedHeaders } from "../../resources/replaced-secrets";
import { refuseIfGranted } from "../../agents/grants-in-use";
import { tool } from "../../db/schema";
import { selectPage } from "../../stores/list-page";
import { AdminListQuery, listing } from "./list-page";
import { toolSlot } from "../../stores/secret-slots";

/**
 * Tool arguments are a JSON object, so the schema must describe one; and one
 * the host can enforce (patterns that compile, local $refs that resolve).
 */
const ParametersSchema = RecordSchema.refine((s) => s.type === undefined || s.type === "object", {
  message: 'parameters must be a JSON Schema of an object (type "object")',
})
  .superRefine((schema, ctx) => {
    for (const problem of schemaProblems(schema)) ctx.addIssue({ code: "custom", message: `parameters schema ${problem}` });
  })
  .default({ type: "object", properties: {} });

/** An HTTP tool: `POST {endpoint}` with the arguments as the JSON body and `headers` (secret) added. */
const ToolInput = z.strictObject({
  name: ToolNameSchema,
  // Stored and compared as read back (a PUT writes only over the row as read): no NUL, at which reading cuts it short.
  description: nulFreeText().max(4000).default(""),
  parameters: ParametersSchema,
  endpoint: EndpointSchema,
  headers: HeadersSchema.optional(),
});

/**
 * PUT takes the body of POST, or what GET answered sent back as it is: its view-only fields are ignored (`name` must be
 * the path's), but for `updated_at`, which, when sent, must still be the stored one (checkReadAsStored).
 */
const ToolReplace = ToolInput.extend({
  name: z.string().optional(),
  source: z.literal("http").optional(),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
});

/** Every tool, HTTP or discovered on an MCP server; header values masked. */
export const toolsRouter = router()
  .get("/", validate("query", AdminListQuery), (c) =>
    listing(c, c.req.valid("query"), {
      kind: "tools",
      read: (page) => selectPage(dbOf(c.env), tool, { id: tool.toolName }, page),
      position: (row) => ({ time: 0, id: row.toolName }),
      view: (rows) => rows.map(toToolView),
    }),
  )
  .post("/", jsonBody(ToolInput, { exact: true }), async (c) => {
    const input = c.get("body");
    const db = dbOf(c.env);
    const store = toolsStore(db);
    const headersJson = JSON.stringify(await sealValues(db.secrets, input.headers ?? {}, toolSlot({ toolName: input.name, endpoint: input.endpoint })));
    await insertUnique(
      () =>
        store.create({
          toolName: input.name,
          description: input.description,
          parametersJson: JSON.stringify(input.parameters),
          endpoint: input.endpoint,
          headersJson,
          ...createdNow(),
        }),
      `tool ${input.name}`,
    );
    return c.json(toToolView((await store.get(input.name))!), 201);
  })
  .get("/:name", async (c) => {
    const row = await toolsStore(dbOf(c.env)).get(c.req.param("name"));
    if (!row) throw notFound(`tool ${c.req.param("name")} not found`);
    return c.json(toToolView(row));
  })
  // In place: its identity (created_at) is kept, so runs under way keep it and call it as it now is (their snapshot
  // keeps the parameters they were shown).
  .put("/:name", jsonBody(ToolReplace, { exact: true }), async (c) => {
    const input = c.get("body");
    const db = dbOf(c.env);
    const store = toolsStore(db);
    const name = c.req.param("name");
    const row = await store.get(name);
    if (!row) throw notFound(`tool ${name} not found`);
    // A refresh would undo it: MCP tools are as their server lists them.
    if (row.mcpServer) throw conflict(`tool ${name} belongs to MCP server ${row.mcpServer}; PUT or refresh the server instead`);
    if (row.endpoint === null) throw conflict(`tool ${name} has no endpoint to replace`);
    if (input.name !== undefined && input.name !== name) throw badRequest(`name ${input.name} is not the tool at this path (${name})`);
    checkReadAsStored(input.updated_at, updatedAtOf(row), `tool ${name}`);
    const endpoint = keptEndpoint(input.endpoint, row.endpoint);
    const headersJson = await replacedHeaders(db.secrets, input.headers, row.headersJson, toolSlot(row), toolSlot({ toolName: name, endpoint }));
    const updated = { ...row, description: input.description, parametersJson: JSON.stringify(input.parameters), endpoint, headersJson, updatedAt: nextUpdatedAt(updatedAtOf(row)) };
    await replaceOrExplain(() => store.replace(updated, row), row, () => store.get(name), `tool ${name}`);
    return c.json(toToolView(updated));
  })
  .delete("/:name", async (c) => {
    const store = toolsStore(dbOf(c.env));
    const name = c.req.param("name");
    const row = await store.get(name);
    if (!row) throw notFound(`tool ${name} not found`);
    // A refresh would bring it back: MCP tools come and go with their server.
    if (row.mcpServer) throw conflict(`tool ${name} belongs to MCP server ${row.mcpServer}; delete or refresh the server instead`);
    await refuseIfGranted(dbOf(c.env), "tools", `tool ${name}`, name, (id) => id === name);
    await store.remove(name);
    return c.body(null, 204);
  });
