import * as z from "zod";
import { EventTypeSchema, RecordSchema, refuseRoundedIntegers, ScopedIdSchema } from "../protocol/common";
import { StateScopeSchema } from "../protocol/context";
import { AllowedPermissionsSchema } from "../protocol/manifest";
import { TEXT_FORMATS } from "../platforms/types";

/**
 * The agent's resource policy. `allow` narrows what the runner's manifest
 * asks for, group by group; an omitted group keeps the manifest's request.
 * Model, tool and knowledge base ids are grants of host-held resources.
 */
export const ResourcePolicySchema = z.strictObject({
  allow: AllowedPermissionsSchema.optional(),
  models: z.array(z.string().min(1)).default([]),
  fallback_models: z.array(z.string().min(1)).default([]),
  tools: z.array(z.string().min(1)).default([]),
  knowledge_bases: z.array(z.string().min(1)).default([]),
});
export type ResourcePolicy = z.infer<typeof ResourcePolicySchema>;

export const StatePolicySchema = z.strictObject({
  enable_state: z.boolean().default(true),
  state_scopes: z.array(StateScopeSchema).default(["conversation", "actor"]),
});
export type StatePolicy = z.infer<typeof StatePolicySchema>;

/** What the user sees when a run fails before showing anything, unless the agent says otherwise. */
export const DEFAULT_FAILURE_NOTICE = "Sorry, I could not answer this time.";

export const DeliveryPolicySchema = z.strictObject({
  streaming: z.boolean().default(true),
  /** In the bot's language: the host has no way to guess it. */
  failure_notice: z.string().trim().min(1).max(1000).default(DEFAULT_FAILURE_NOTICE),
  /** `plain` shows the answer's text as it is where the host would render its Markdown (Telegram, Slack, Lark). */
  format: z.enum(TEXT_FORMATS).default("markdown"),
});
export type DeliveryPolicy = z.infer<typeof DeliveryPolicySchema>;

/**
 * When the agent answers a message in a group chat (a DM, a command, a press are always answered). `all` (the default)
 * answers every message the platform delivers; `addressed` only one that mentions the bot, replies to its message, is a
 * command for it, or starts with one of `prefixes` (as typed, case and all): the rest is recorded with its transcript
 * item, for later runs to read, and starts nothing (disposition `unaddressed`).
 */
export const GROUP_MESSAGE_RULES = ["all", "addressed"] as const;
export const TriggerPolicySchema = z.strictObject({
  group_messages: z.enum(GROUP_MESSAGE_RULES).default("all"),
  // Checked in the database, against the text the runner would get (the bot's leading mention left out).
  prefixes: z.array(z.string().min(1).max(100).regex(/^\S/, "a prefix starts with a visible character")).max(20).default([]),
});
export type TriggerPolicy = z.infer<typeof TriggerPolicySchema>;

export const CONCURRENCY_STRATEGIES = ["steer", "enqueue", "interrupt", "reject", "parallel"] as const;
export type ConcurrencyStrategy = (typeof CONCURRENCY_STRATEGIES)[number];
export const ConcurrencySchema = z
  .strictObject({
    strategy: z.enum(CONCURRENCY_STRATEGIES).optional(),
    /** The quiet time a run's start waits for: a burst's messages each push it back this long (README "Bursts"). */
    debounce_ms: z.int().min(0).max(60_000).optional(),
    /** How far a burst may push the start back, from its first message (default: debounceLimitMs). */
    debounce_max_ms: z.int().min(0).max(300_000).optional(),
  })
  .refine((c) => c.debounce_max_ms === undefined || c.debounce_max_ms >= (c.debounce_ms ?? 0), { message: "debounce_max_ms is at least debounce_ms", path: ["debounce_max_ms"] });
export type Concurrency = z.infer<typeof ConcurrencySchema>;

/** How long after a burst's first message its run starts at the latest: unless the agent says, four quiet times, at most a minute (debounce_ms is at most a minute: never less than one). */
export const debounceLimitMs = (c: Concurrency): number => c.debounce_max_ms ?? Math.min(4 * (c.debounce_ms ?? 0), 60_000);

export const ScopeSchema = z
  .strictObject({
    type: z.enum(["global", "workspace", "bot", "conversation"]),
    id: ScopedIdSchema.optional(),
    /** Conversation scope only: the conversation as one bot sees it (chat ids are unique per platform, not per bot). */
    bot_id: ScopedIdSchema.optional(),
    /** Conversation scope only: the conversation of one workspace (callers of POST /v1/events name conversations per workspace). */
    workspace_id: ScopedIdSchema.optional(),
  })
  .refine((s) => (s.type === "global" ? s.id === undefined : s.id !== undefined), {
    message: "scope.id is required for workspace, bot and conversation scopes, and must be absent for global",
  })
  .refine((s) => s.bot_id === undefined || s.type === "conversation", { message: "scope.bot_id is only for conversation scopes" })
  .refine((s) => s.workspace_id === undefined || s.type === "conversation", { message: "scope.workspace_id is only for conversation scopes" })
  // A bot belongs to one workspace at most, so its conversation is already one workspace's.
  .refine((s) => s.workspace_id === undefined || s.bot_id === undefined, { message: "scope takes bot_id or workspace_id, not both" });
export type Scope = z.infer<typeof ScopeSchema>;

/**
 * How a scope is stored in `agent_binding`: a conversation seen by one bot, or
 * in one workspace, is its own scope type, keyed by both ids, so it outranks
 * the same conversation id anywhere and never collides with it.
 */
export function storedScope(scope: Scope): { scopeType: string; scopeId: string } {
  if (scope.type === "conversation" && scope.bot_id !== undefined) return { scopeType: "bot_conversation", scopeId: qualifiedConversationKey(scope.bot_id, scope.id!) };
  if (scope.type === "conversation" && scope.workspace_id !== undefined) {
    return { scopeType: "workspace_conversation", scopeId: qualifiedConversationKey(scope.workspace_id, scope.id!) };
  }
  return { scopeType: scope.type, scopeId: scope.id ?? "" };
}

export function scopeView(scopeType: string, scopeId: string): Scope {
  if (scopeType === "global") return { type: "global" };
  if (scopeType === "bot_conversation" || scopeType === "workspace_conversation") {
    // Written by qualifiedConversationKey.
    const [owner, id] = JSON.parse(scopeId) as [string, string];
    return scopeType === "bot_conversation" ? { type: "conversation", id, bot_id: owner } : { type: "conversation", id, workspace_id: owner };
  }
  // Stored from a validated scope.
  return { type: scopeType as Scope["type"], id: scopeId };
}

/** A conversation id qualified by the bot or workspace it belongs to. */
export const qualifiedConversationKey = (ownerId: string, conversationId: string) => JSON.stringify([ownerId, conversationId]);

/** Body of POST/PUT /v1/admin/agents. */
export const AgentInputSchema = z.strictObject({
  agent_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/).optional(),
  name: z.string().min(1).max(200),
  description: z.string().max(2000).optional(),
  runner_id: z.string().min(1),
  // Handed to the runner as ctx.config as written: a 64-bit id JSON parsing rounded is refused, never stored altered.
  runner_config: RecordSchema.superRefine(refuseRoundedIntegers).default({}),
  event_types: z.array(EventTypeSchema).min(1),
  scope: ScopeSchema.default({ type: "global" }),
  resource_policy: ResourcePolicySchema.default(ResourcePolicySchema.parse({})),
  state_policy: StatePolicySchema.default(StatePolicySchema.parse({})),
  delivery_policy: DeliveryPolicySchema.default(DeliveryPolicySchema.parse({})),
  trigger_policy: TriggerPolicySchema.default(TriggerPolicySchema.parse({})),
  concurrency: ConcurrencySchema.default({}),
  enabled: z.boolean().default(true),
});
export type AgentInput = z.infer<typeof AgentInputSchema>;
