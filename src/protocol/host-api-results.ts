/**
 * What Host API actions return in `{"ok": true, "data": ...}` (PROTOCOL.md §8).
 * Field names follow §8 exactly. Where §8 only says "value", "ok" or "keys",
 * the shape is fixed here as a small object so it can grow without breaking.
 */
import * as z from "zod";
import {
  ArtifactRefSchema,
  JsonValueSchema,
  ModelMessageSchema,
  RecordSchema,
  TimestampSchema,
} from "./common";
import {
  ActorContextSchema,
  AgentEventContextSchema,
  ConversationContextSchema,
  InputContextSchema,
  SubjectContextSchema,
} from "./context";

export const TranscriptItemSchema = z.object({
  transcript_id: z.string().min(1),
  event_id: z.string().min(1),
  conversation_id: z.string().nullish(),
  thread_id: z.string().nullish(),
  role: z.string().min(1),
  item_type: z.string().min(1),
  content: z.string().nullish(),
  content_json: JsonValueSchema.nullish(), // structured content, e.g. ContentElement[]
  artifact_refs: z.array(ArtifactRefSchema).default([]),
  seq: z.int().nonnegative(),
  cursor: z.string().min(1),
  created_at: TimestampSchema,
  metadata: RecordSchema.default({}),
});
export type TranscriptItem = z.infer<typeof TranscriptItemSchema>;

export const HistoryPageSchema = z.object({
  items: z.array(TranscriptItemSchema),
  next_cursor: z.string().nullish(),
  prev_cursor: z.string().nullish(),
  has_more: z.boolean(),
  total_count: z.int().nonnegative().nullish(),
});
export type HistoryPage = z.infer<typeof HistoryPageSchema>;

/** A history.search hit: a transcript item and its relevance (higher is better; comparable within one answer only). */
export const HistorySearchItemSchema = TranscriptItemSchema.extend({ score: z.number() });
export type HistorySearchItem = z.infer<typeof HistorySearchItemSchema>;

export const HistorySearchResultSchema = z.object({
  items: z.array(HistorySearchItemSchema),
  total_count: z.int().nonnegative().nullish(),
  query: z.string(),
});
export type HistorySearchResult = z.infer<typeof HistorySearchResultSchema>;

export const AgentEventRecordSchema = z.object({
  event_id: z.string().min(1),
  event_type: z.string().min(1), // includes host records such as steering.injected
  event_time: TimestampSchema.nullish(),
  source: z.string().min(1),
  bot_id: z.string().nullish(),
  workspace_id: z.string().nullish(),
  conversation_id: z.string().nullish(),
  thread_id: z.string().nullish(),
  actor_type: z.string().nullish(),
  actor_id: z.string().nullish(),
  actor_name: z.string().nullish(),
  subject_type: z.string().nullish(),
  subject_id: z.string().nullish(),
  input_summary: z.string().nullish(),
  raw_ref: z.string().nullish(),
  seq: z.int().nonnegative(),
  cursor: z.string().min(1),
  created_at: TimestampSchema,
  metadata: RecordSchema.default({}),
});
export type AgentEventRecord = z.infer<typeof AgentEventRecordSchema>;

export const EventPageSchema = z.object({
  items: z.array(AgentEventRecordSchema),
  next_cursor: z.string().nullish(),
  prev_cursor: z.string().nullish(),
  has_more: z.boolean(),
});
export type EventPage = z.infer<typeof EventPageSchema>;

export const SteeringInputItemSchema = z.object({
  claimed_run_id: z.string().min(1),
  runner_id: z.string().min(1),
  claimed_at: TimestampSchema,
  event: AgentEventContextSchema,
  input: InputContextSchema,
  conversation: ConversationContextSchema.nullish(),
  actor: ActorContextSchema.nullish(),
  subject: SubjectContextSchema.nullish(),
  metadata: RecordSchema.default({}),
});
export type SteeringInputItem = z.infer<typeof SteeringInputItemSchema>;

export const SteeringPullResultSchema = z.object({ items: z.array(SteeringInputItemSchema) });
export type SteeringPullResult = z.infer<typeof SteeringPullResultSchema>;

export const ArtifactMetadataSchema = z.object({
  artifact_id: z.string().min(1),
  artifact_type: z.string().min(1),
  mime_type: z.string().nullish(),
  name: z.string().nullish(),
  size_bytes: z.int().nonnegative().nullish(),
  sha256: z.string().nullish(),
  source: z.string().min(1), // e.g. "ingress", "runner", "upload"
  conversation_id: z.string().nullish(),
  run_id: z.string().nullish(),
  runner_id: z.string().nullish(),
  created_at: TimestampSchema,
  expires_at: TimestampSchema.nullish(),
  metadata: RecordSchema.default({}),
});
export type ArtifactMetadata = z.infer<typeof ArtifactMetadataSchema>;

export const ArtifactReadResultSchema = z.object({
  artifact_id: z.string().min(1),
  mime_type: z.string().nullish(),
  size_bytes: z.int().nonnegative().nullish(),
  offset: z.int().nonnegative(),
  length: z.int().nonnegative(), // bytes actually returned; 0 at or past the end
  content_base64: z.string(),
  has_more: z.boolean(),
});
export type ArtifactReadResult = z.infer<typeof ArtifactReadResultSchema>;

/** state.get: `value` is null when the key is absent; `found` tells an absent key from a stored null. */
export const StateGetResultSchema = z.object({ value: JsonValueSchema, found: z.boolean() });
export type StateGetResult = z.infer<typeof StateGetResultSchema>;

export const StateListResultSchema = z.object({
  keys: z.array(z.string()),
  has_more: z.boolean(),
  next_cursor: z.string().nullish(),
});
export type StateListResult = z.infer<typeof StateListResultSchema>;

/** storage.get: bytes as base64, null when the key is absent. */
export const StorageGetResultSchema = z.object({ value_base64: z.string().nullable(), found: z.boolean() });
export type StorageGetResult = z.infer<typeof StorageGetResultSchema>;

export const StorageKeysResultSchema = z.object({
  keys: z.array(z.string()),
  has_more: z.boolean().default(false),
  next_cursor: z.string().nullish(),
});
export type StorageKeysResult = z.infer<typeof StorageKeysResultSchema>;

/** state.set / state.delete / storage.set / storage.delete. */
export const AckResultSchema = z.object({ ok: z.literal(true) });
export type AckResult = z.infer<typeof AckResultSchema>;

/** model.invoke: the provider-neutral reply; provider extras (usage, tool_calls) pass through. */
export const ModelInvokeResultSchema = z.looseObject({ message: ModelMessageSchema });
export type ModelInvokeResult = z.infer<typeof ModelInvokeResultSchema>;

export const RerankResultSchema = z.object({
  results: z.array(z.object({ index: z.int().nonnegative(), score: z.number() })),
});
export type RerankResult = z.infer<typeof RerankResultSchema>;

export const KnowledgeRetrieveResultSchema = z.object({
  entries: z.array(
    z.object({ content: z.string(), score: z.number(), metadata: RecordSchema.default({}) }),
  ),
});
export type KnowledgeRetrieveResult = z.infer<typeof KnowledgeRetrieveResultSchema>;

export const HostVersionResultSchema = z.object({ version: z.string() });
export type HostVersionResult = z.infer<typeof HostVersionResultSchema>;
