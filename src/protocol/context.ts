/**
 * What the host sends to a runner (PROTOCOL.md §3, §5, §6): AgentRunRequest and
 * its AgentRunContext. These objects strip unknown keys rather than refusing
 * them, so an older runner keeps working when a newer host adds fields.
 */
import * as z from "zod";
import {
  ArtifactRefSchema,
  ContentElementSchema,
  RecordSchema,
  TimestampSchema,
} from "./common";
import { AgentResourcesSchema } from "./resources";

export const TRIGGER_SOURCES = [
  "platform",
  "webui",
  "api",
  "scheduler",
  "system",
  "host_adapter",
] as const;

export const TriggerSchema = z.object({
  type: z.string().min(1),
  source: z.enum(TRIGGER_SOURCES),
  timestamp: TimestampSchema.nullish(),
});
export type Trigger = z.infer<typeof TriggerSchema>;

/**
 * The current event. `event_type` is a plain string here (the stable names are
 * EVENT_TYPES) so that a runner does not reject a context carrying a newer name.
 * `raw_ref` is an opaque reference to the raw payload kept in R2, never the payload.
 */
export const AgentEventContextSchema = z.object({
  event_id: z.string().min(1),
  event_type: z.string().min(1),
  event_time: TimestampSchema.nullish(),
  source: z.string().min(1),
  source_event_type: z.string().nullish(),
  raw_ref: z.string().nullish(),
  data: RecordSchema.default({}),
});
export type AgentEventContext = z.infer<typeof AgentEventContextSchema>;

export const ConversationContextSchema = z.object({
  conversation_id: z.string().nullish(),
  thread_id: z.string().nullish(),
  launcher_type: z.string().nullish(),
  launcher_id: z.string().nullish(),
  sender_id: z.string().nullish(),
  bot_id: z.string().nullish(),
  workspace_id: z.string().nullish(),
  session_id: z.string().nullish(),
});
export type ConversationContext = z.infer<typeof ConversationContextSchema>;

export const ActorContextSchema = z.object({
  actor_type: z.string().min(1),
  actor_id: z.string().nullish(),
  actor_name: z.string().nullish(),
  metadata: RecordSchema.default({}),
});
export type ActorContext = z.infer<typeof ActorContextSchema>;

export const SubjectContextSchema = z.object({
  subject_type: z.string().min(1),
  subject_id: z.string().nullish(),
  data: RecordSchema.default({}),
});
export type SubjectContext = z.infer<typeof SubjectContextSchema>;

/** The current event's input only; history is pulled, never inlined. */
export const InputContextSchema = z.object({
  text: z.string().nullish(),
  contents: z.array(ContentElementSchema).default([]),
  attachments: z.array(ArtifactRefSchema).default([]),
});
export type InputContext = z.infer<typeof InputContextSchema>;

export const DeliveryContextSchema = z.object({
  surface: z.string().min(1),
  reply_target: RecordSchema.nullish(),
  supports_streaming: z.boolean().default(false),
  supports_edit: z.boolean().default(false),
  supports_reaction: z.boolean().default(false),
  max_message_size: z.int().positive().nullish(),
  platform_capabilities: RecordSchema.default({}),
});
export type DeliveryContext = z.infer<typeof DeliveryContextSchema>;

export const INLINE_POLICY_MODES = ["none", "current_event", "recent_tail", "summary_tail"] as const;

export const InlinePolicySchema = z.object({
  mode: z.enum(INLINE_POLICY_MODES),
  delivered_count: z.int().nonnegative().default(0),
  source_total_count: z.int().nonnegative().nullish(),
  messages_complete: z.boolean().default(false),
  reason: z.string().nullish(),
});
export type InlinePolicy = z.infer<typeof InlinePolicySchema>;

export const AVAILABLE_API_NAMES = [
  "history_page",
  "history_search",
  "event_get",
  "event_page",
  "artifact_metadata",
  "artifact_read",
  "state",
  "storage",
  "steering_pull",
] as const;
export type AvailableApiName = (typeof AVAILABLE_API_NAMES)[number];

/** Host API families this run may call; absent means not granted. */
export const AvailableApisSchema = z.object({
  history_page: z.boolean().default(false),
  history_search: z.boolean().default(false),
  event_get: z.boolean().default(false),
  event_page: z.boolean().default(false),
  artifact_metadata: z.boolean().default(false),
  artifact_read: z.boolean().default(false),
  state: z.boolean().default(false),
  storage: z.boolean().default(false),
  steering_pull: z.boolean().default(false),
});
export type AvailableApis = z.infer<typeof AvailableApisSchema>;

/** Cursors are opaque strings; runners must not parse or compare them. */
export const ContextAccessSchema = z.object({
  conversation_id: z.string().nullish(),
  thread_id: z.string().nullish(),
  latest_cursor: z.string().nullish(),
  event_seq: z.int().nonnegative().nullish(),
  transcript_seq: z.int().nonnegative().nullish(),
  has_history_before: z.boolean().default(false),
  inline_policy: InlinePolicySchema,
  available_apis: AvailableApisSchema,
});
export type ContextAccess = z.infer<typeof ContextAccessSchema>;

export const STATE_SCOPES = ["conversation", "actor", "subject", "runner"] as const;
export const StateScopeSchema = z.enum(STATE_SCOPES);
export type StateScope = z.infer<typeof StateScopeSchema>;

/** Snapshot of the enabled state scopes at run start, key -> JSON value. */
export const StateSnapshotSchema = z.object({
  conversation: RecordSchema.default({}),
  actor: RecordSchema.default({}),
  subject: RecordSchema.default({}),
  runner: RecordSchema.default({}),
});
export type StateSnapshot = z.infer<typeof StateSnapshotSchema>;
/** What the host sends: only the scopes enabled by the state policy and identified by the event. */
export type EnabledStateSnapshot = Partial<StateSnapshot>;

/** Where and with which bearer token the runner calls the Host API (§8); valid while the run is active. */
export const RuntimeApiSchema = z.object({
  base_url: z.string().min(1),
  token: z.string().min(1),
  expires_at: TimestampSchema,
});
export type RuntimeApi = z.infer<typeof RuntimeApiSchema>;

export const RuntimeContextSchema = z.object({
  host_version: z.string().nullish(),
  trace_id: z.string().nullish(),
  deadline_at: TimestampSchema.nullish(),
  api: RuntimeApiSchema,
  metadata: RecordSchema.default({}),
});
export type RuntimeContext = z.infer<typeof RuntimeContextSchema>;

/** One-off ingress metadata; runners should not build on it. */
export const AdapterContextSchema = z.object({
  source: z.string().min(1),
  extra: RecordSchema.default({}),
});
export type AdapterContext = z.infer<typeof AdapterContextSchema>;

export const AgentRunContextSchema = z.object({
  run_id: z.string().min(1),
  trigger: TriggerSchema,
  event: AgentEventContextSchema,
  conversation: ConversationContextSchema.nullish(),
  actor: ActorContextSchema.nullish(),
  subject: SubjectContextSchema.nullish(),
  input: InputContextSchema,
  delivery: DeliveryContextSchema,
  resources: AgentResourcesSchema,
  context: ContextAccessSchema,
  state: StateSnapshotSchema,
  runtime: RuntimeContextSchema,
  config: RecordSchema.default({}), // the agent's runner_config
  adapter: AdapterContextSchema.nullish(),
  metadata: RecordSchema.default({}),
});
export type AgentRunContext = z.infer<typeof AgentRunContextSchema>;
/** What the host may build before defaults are applied (fields with defaults are optional). */
export type AgentRunContextInput = z.input<typeof AgentRunContextSchema>;

/** Body of `POST {base_url}/runners/{runner}/run`. */
export const AgentRunRequestSchema = z.object({
  runner_id: z.string().min(1),
  runner_name: z.string().min(1),
  context: AgentRunContextSchema,
});
export type AgentRunRequest = z.infer<typeof AgentRunRequestSchema>;
export type AgentRunRequestInput = z.input<typeof AgentRunRequestSchema>;
