/** Agents and the bindings that route each (scope, event type) to one of them. */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

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
