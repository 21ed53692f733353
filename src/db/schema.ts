import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

// Times are integer milliseconds since the epoch; JSON columns are text.
// Every table a run or an ingress event touches is keyed so that reads used on
// hot paths (history paging, ledger replay, binding resolution) are index scans.

/** EventLog: append-only record of every ingress event and host decision. */
export const eventLog = sqliteTable(
  "event_log",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    eventId: text("event_id").notNull(),
    eventType: text("event_type").notNull(),
    eventTime: text("event_time"),
    source: text("source").notNull(),
    sourceEventType: text("source_event_type"),
    workspaceId: text("workspace_id"),
    botId: text("bot_id"),
    conversationKey: text("conversation_key"),
    conversationId: text("conversation_id"),
    threadId: text("thread_id"),
    actorType: text("actor_type"),
    actorId: text("actor_id"),
    actorName: text("actor_name"),
    subjectType: text("subject_type"),
    subjectId: text("subject_id"),
    inputJson: text("input_json"),
    inputSummary: text("input_summary"),
    dataJson: text("data_json").notNull().default("{}"),
    rawRef: text("raw_ref"),
    runId: text("run_id"),
    agentId: text("agent_id"),
    disposition: text("disposition"),
    // Random per ingress attempt: the writes that follow an event insert in the
    // same batch are guarded on it, so a duplicate event adds nothing.
    acceptId: text("accept_id"),
    metadataJson: text("metadata_json").notNull().default("{}"),
    // What an API event said (ingress/fingerprint.ts): a repeat of its event_id saying otherwise is refused. Null for
    // platform events (their redeliveries stay repeats) and for rows recorded before migration 0019.
    fingerprint: text("fingerprint"),
    // A chat message's own id on its platform (Slack ts, Telegram and Lark message_id), as its recalls and edits name it:
    // they find its transcript item by it, however old (migration 0021). Null for every other event.
    messageRef: text("message_ref"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    uniqueIndex("event_log_event_id").on(t.eventId),
    index("event_log_message").on(t.botId, t.conversationId, t.messageRef).where(sql`${t.messageRef} IS NOT NULL`),
    index("event_log_conversation").on(t.conversationKey, t.seq),
    // Platform events only (HTTP events have none): retention asks which stored payloads are still named.
    index("event_log_raw_ref").on(t.rawRef).where(sql`${t.rawRef} IS NOT NULL`),
  ],
);

/** Transcript: the conversation view, sequenced per conversation key. */
export const transcript = sqliteTable(
  "transcript",
  {
    transcriptId: text("transcript_id").primaryKey(),
    conversationKey: text("conversation_key").notNull(),
    seq: integer("seq").notNull(),
    eventId: text("event_id").notNull(),
    runId: text("run_id"),
    conversationId: text("conversation_id"),
    threadId: text("thread_id"),
    role: text("role").notNull(),
    itemType: text("item_type").notNull(),
    content: text("content"),
    // What the full-text index reads instead of content when set: content with each character of a script written
    // without spaces (Chinese, Japanese, Thai, ...) as a word of its own, so a word inside a sentence is found.
    searchText: text("search_text"),
    contentJson: text("content_json"),
    artifactRefsJson: text("artifact_refs_json").notNull().default("[]"),
    metadataJson: text("metadata_json").notNull().default("{}"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("transcript_conversation_seq").on(t.conversationKey, t.seq), index("transcript_event").on(t.eventId)],
);

/** Host-owned runner state, keyed by a hash of (runner, binding, scope identity). */
export const runnerState = sqliteTable(
  "runner_state",
  {
    scopeKey: text("scope_key").notNull(),
    key: text("key").notNull(),
    runnerId: text("runner_id").notNull(),
    scope: text("scope").notNull(),
    valueJson: text("value_json").notNull(),
    updatedAt: integer("updated_at").notNull(),
    // The agent that wrote it, so deleting the agent deletes its state; null for rows written before migration 0009.
    agentId: text("agent_id"),
    // The writing agent's state epoch (null for an agent without one): a run of a deleted agent writes nothing even
    // once another agent has its id (migration 0014). Null for rows written before 0014.
    agentEpoch: text("agent_epoch"),
  },
  // By agent and epoch: retention deletes one deleted agent's rows (deleted_owner) without walking those of another
  // agent created since under its id.
  (t) => [primaryKey({ columns: [t.scopeKey, t.key] }), index("runner_state_agent_epoch").on(t.agentId, t.agentEpoch)],
);

/** Artifact metadata; blobs live in R2 under `r2_key`. */
export const artifact = sqliteTable(
  "artifact",
  {
    artifactId: text("artifact_id").primaryKey(),
    artifactType: text("artifact_type").notNull(),
    mimeType: text("mime_type"),
    name: text("name"),
    sizeBytes: integer("size_bytes"),
    sha256: text("sha256"),
    source: text("source").notNull(),
    conversationKey: text("conversation_key"),
    conversationId: text("conversation_id"),
    runId: text("run_id"),
    runnerId: text("runner_id"),
    r2Key: text("r2_key").notNull(),
    metadataJson: text("metadata_json").notNull().default("{}"),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at"),
  },
  (t) => [index("artifact_run").on(t.runId), index("artifact_expiry").on(t.expiresAt)],
);

/** Run ledger: one row per run. */
export const run = sqliteTable(
  "run",
  {
    runId: text("run_id").primaryKey(),
    eventId: text("event_id").notNull(),
    conversationKey: text("conversation_key").notNull(),
    conversationId: text("conversation_id"),
    threadId: text("thread_id"),
    workspaceId: text("workspace_id"),
    botId: text("bot_id"),
    agentId: text("agent_id").notNull(),
    runnerId: text("runner_id").notNull(),
    status: text("status").notNull(),
    finishReason: text("finish_reason"),
    finalMessageJson: text("final_message_json"),
    errorCode: text("error_code"),
    errorMessage: text("error_message"),
    resultCount: integer("result_count").notNull().default(0),
    /** The conversation's newest transcript seq when its event was recorded (0: none; null: recorded before migration 0015). */
    latestTranscriptSeq: integer("latest_transcript_seq"),
    /** The state epoch of the agent that bound its event ("" for an agent without one; null: recorded before migration 0016). */
    agentEpoch: text("agent_epoch"),
    createdAt: integer("created_at").notNull(),
    startedAt: integer("started_at"),
    endedAt: integer("ended_at"),
  },
  (t) => [
    index("run_conversation").on(t.conversationKey, t.createdAt),
    // The admin run listing: by conversation id and/or status, newest first, keyset-paged on (created_at, run_id).
    index("run_status").on(t.status, t.createdAt, t.runId),
    index("run_conversation_id").on(t.conversationId, t.createdAt, t.runId),
    index("run_created").on(t.createdAt, t.runId),
    // An agent's runs, newest first (GET /v1/runs?agent_id=): a page read from it, never a walk of every run.
    index("run_agent").on(t.agentId, t.createdAt, t.runId),
    // A bot's runs, a workspace's, newest first (GET /v1/runs?bot_id=, ?workspace_id=): likewise never a walk of every run.
    index("run_bot").on(t.botId, t.createdAt, t.runId),
    index("run_workspace").on(t.workspaceId, t.createdAt, t.runId),
  ],
);

/** Run ledger: every result (and host-made record) of a run, in host order. */
export const runEvent = sqliteTable(
  "run_event",
  {
    runId: text("run_id").notNull(),
    seq: integer("seq").notNull(),
    type: text("type").notNull(),
    dataJson: text("data_json").notNull(),
    runnerSequence: integer("runner_sequence"),
    origin: text("origin").notNull(), // "runner" | "host"
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.seq] })],
);

/** A registered runner service (one manifest). */
export const runnerService = sqliteTable(
  "runner_service",
  {
    serviceId: text("service_id").primaryKey(),
    baseUrl: text("base_url").notNull(),
    // Shared HMAC secret used to sign run requests; never returned by any API.
    secret: text("secret"),
    author: text("author"),
    name: text("name"),
    version: text("version"),
    manifestJson: text("manifest_json"),
    lastError: text("last_error"),
    fetchedAt: integer("fetched_at"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("runner_service_base_url").on(t.baseUrl), index("runner_service_created").on(t.createdAt, t.serviceId)],
);

/** A runner inside a service, id `http:{author}/{name}/{runner}`. */
export const runner = sqliteTable(
  "runner",
  {
    runnerId: text("runner_id").primaryKey(),
    serviceId: text("service_id").notNull(),
    name: text("name").notNull(),
    manifestJson: text("manifest_json").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [index("runner_by_service").on(t.serviceId)],
);

/** Operator-managed agent configuration. */
export const agent = sqliteTable(
  "agent",
  {
    agentId: text("agent_id").primaryKey(),
    name: text("name").notNull(),
    description: text("description"),
    runnerId: text("runner_id").notNull(),
    runnerConfigJson: text("runner_config_json").notNull().default("{}"),
    eventTypesJson: text("event_types_json").notNull(),
    scopeType: text("scope_type").notNull(),
    scopeId: text("scope_id").notNull(), // "" for global
    resourcePolicyJson: text("resource_policy_json").notNull().default("{}"),
    statePolicyJson: text("state_policy_json").notNull().default("{}"),
    deliveryPolicyJson: text("delivery_policy_json").notNull().default("{}"),
    // When it answers a group's messages (agents/policy.ts TriggerPolicySchema); read by ingress's batch itself. Migration 0023.
    triggerPolicyJson: text("trigger_policy_json").notNull().default("{}"),
    concurrencyJson: text("concurrency_json").notNull().default("{}"),
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    // Random per created agent and part of its state scope keys: an agent created again under a deleted one's id starts
    // with no state. Null for agents created before migration 0009 (their keys are unchanged).
    stateEpoch: text("state_epoch"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  // An operator may have thousands of agents: the admin listing pages by creation, a runner service's refresh, move
  // and DELETE (and migration 0008's triggers) find agents by runner, and an unbound event's reason finds them by scope.
  (t) => [index("agent_created").on(t.createdAt, t.agentId), index("agent_runner").on(t.runnerId, t.agentId), index("agent_scope").on(t.scopeType, t.scopeId)],
);

/**
 * One row per (scope, event type) of every enabled agent. The primary key is
 * what makes an ambiguous binding impossible: a second enabled agent claiming
 * the same scope and event type fails to insert (409 at write time).
 */
export const agentBinding = sqliteTable(
  "agent_binding",
  {
    scopeType: text("scope_type").notNull(),
    scopeId: text("scope_id").notNull(),
    eventType: text("event_type").notNull(),
    agentId: text("agent_id").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.scopeType, t.scopeId, t.eventType] }),
    index("agent_binding_agent").on(t.agentId),
  ],
);

/** Blob storage for the `plugin` (per runner service) and `workspace` areas. */
export const storage = sqliteTable(
  "storage",
  {
    area: text("area").notNull(),
    ownerKey: text("owner_key").notNull(),
    key: text("key").notNull(),
    valueBase64: text("value_base64").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.area, t.ownerKey, t.key] })],
);

/**
 * What a deleted agent or runner service left behind, for retention to delete in bounded batches: an agent's state
 * (`kind` "agent_state": `owner_id` its id, `epoch` its state epoch) or a service's plugin storage area ("plugin_storage":
 * its service id). Noted by the DELETE in the batch that deletes the owner; removed once nothing of it is left.
 */
export const deletedOwner = sqliteTable(
  "deleted_owner",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    kind: text("kind").notNull(),
    ownerId: text("owner_id").notNull(),
    epoch: text("epoch"),
    deletedAt: integer("deleted_at").notNull(),
  },
  (t) => [index("deleted_owner_kind").on(t.kind, t.seq)],
);

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
  },
  (t) => [index("knowledge_base_created").on(t.createdAt, t.kbId)],
);

/**
 * A chat platform bot an operator registered (Telegram, Slack, Lark, Discord).
 * Its webhook is `/v1/webhooks/{platform}/{bot_id}`; agents bind to it with scope `bot`.
 */
export const bot = sqliteTable(
  "bot",
  {
    botId: text("bot_id").primaryKey(),
    platform: text("platform").notNull(),
    name: text("name"),
    workspaceId: text("workspace_id"),
    // Overrides the platform's API origin (a fake on loopback in tests); null uses the platform's own.
    apiBaseUrl: text("api_base_url"),
    // The platform's secrets as JSON; never returned by any API nor logged.
    credentialsJson: text("credentials_json").notNull(),
    // Paused when false: its webhooks are still verified and answered, their events recorded, but nothing runs.
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    // Why the bot last did not answer, for its admin view (src/stores/bot-notes.ts): JSON, null until it first happens.
    // Written where each happens, never on a webhook or reply that went well, and never by a PUT.
    lastWebhookRefusalJson: text("last_webhook_refusal_json"),
    lastUnboundEventJson: text("last_unbound_event_json"),
    lastDeliveryFailureJson: text("last_delivery_failure_json"),
  },
  (t) => [index("bot_created").on(t.createdAt, t.botId)],
);

/**
 * A chat whose events continue another chat's conversation, per bot: a Telegram group upgraded to a supergroup gets a
 * new chat id, and the supergroup's events are recorded in the group's conversation (src/stores/chat-moves.ts).
 */
export const chatAlias = sqliteTable(
  "chat_alias",
  {
    botId: text("bot_id").notNull(),
    // The chat as its events name it (the supergroup).
    chatId: text("chat_id").notNull(),
    // The conversation they are recorded in (the group's chat id).
    conversationId: text("conversation_id").notNull(),
    // When the host learned of the move: a bot id registered again later does not take it (Bot.registeredAt).
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.botId, t.chatId] })],
);
