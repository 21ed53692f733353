/** Host-held resources an agent may be granted: models, MCP servers, tools, knowledge bases. */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * A host-held model: an OpenAI-compatible endpoint the operator registered.
 * `api_key` is a secret: never selected for listings, never sent to runners.
 */
export const model = sqliteTable(
  "model",
  {
    modelId: text("model_id").primaryKey(),
    name: text("name").notNull(),
    kind: text("kind").notNull(), // "llm" | "rerank" | "embedding"
    baseUrl: text("base_url").notNull(),
    apiKey: text("api_key").notNull(),
    providerModel: text("provider_model").notNull(), // the provider's model name
    contextWindow: integer("context_window"),
    createdAt: integer("created_at").notNull(),
    // Strictly later at each PUT (src/lib/updated-at.ts); null on rows stored before migration 0028: created_at stands for it.
    updatedAt: integer("updated_at"),
  },
  (t) => [index("model_created").on(t.createdAt, t.modelId)],
);

/** An MCP server reached over streamable HTTP; its tools are rows of `tool`. `headers_json` is secret. */
export const mcpServer = sqliteTable("mcp_server", {
  name: text("name").primaryKey(),
  url: text("url").notNull(),
  headersJson: text("headers_json").notNull().default("{}"),
  discoveredAt: integer("discovered_at").notNull(),
  createdAt: integer("created_at").notNull(),
  // Strictly later at each PUT (src/lib/updated-at.ts), not at a refresh (`discovered_at` says when); null on rows stored
  // before migration 0028: created_at stands for it.
  updatedAt: integer("updated_at"),
});

/**
 * A host-held tool: an HTTP tool (endpoint + secret headers) or one discovered
 * on an MCP server (named `{server}.{tool}`).
 */
export const tool = sqliteTable(
  "tool",
  {
    toolName: text("tool_name").primaryKey(),
    description: text("description").notNull().default(""),
    parametersJson: text("parameters_json").notNull().default("{}"), // JSON Schema of the arguments
    endpoint: text("endpoint"),
    headersJson: text("headers_json"),
    mcpServer: text("mcp_server"),
    mcpToolName: text("mcp_tool_name"), // the tool's own name on its server
    createdAt: integer("created_at").notNull(),
    // Strictly later at each PUT (src/lib/updated-at.ts); an MCP tool's, its server's last listing of it. Null on rows
    // stored before migration 0028: created_at stands for it.
    updatedAt: integer("updated_at"),
  },
  (t) => [index("tool_by_mcp_server").on(t.mcpServer)],
);

/** A retrieval endpoint (query in, scored entries out). `api_key` is secret. */
export const knowledgeBase = sqliteTable(
  "knowledge_base",
  {
    kbId: text("kb_id").primaryKey(),
    name: text("name").notNull(),
    description: text("description"),
    endpoint: text("endpoint").notNull(),
    apiKey: text("api_key"),
    createdAt: integer("created_at").notNull(),
    // Strictly later at each PUT (src/lib/updated-at.ts); null on rows stored before migration 0028: created_at stands for it.
    updatedAt: integer("updated_at"),
  },
  (t) => [index("knowledge_base_created").on(t.createdAt, t.kbId)],
);
