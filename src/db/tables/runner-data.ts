/** What runs keep through the host (state, plugin and workspace storage), and what deleted owners left of it. */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

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
 * How much one state scope holds: its keys and the UTF-8 bytes of their values. Kept by triggers on runner_state
 * (migration 0027) on every insert, overwrite and delete, whichever path writes (a run, retention), so the caps
 * (STATE_MAX_SCOPE_KEYS, STATE_MAX_SCOPE_BYTES) are checked against one row instead of a count over the scope. A
 * scope without keys has no row.
 */
export const runnerStateUsage = sqliteTable("runner_state_usage", {
  scopeKey: text("scope_key").primaryKey(),
  keys: integer("keys").notNull(),
  bytes: integer("bytes").notNull(),
});

/** How much one storage area holds (its keys, its values' decoded bytes), kept as runnerStateUsage is (STORAGE_MAX_AREA_*). */
export const storageUsage = sqliteTable(
  "storage_usage",
  {
    area: text("area").notNull(),
    ownerKey: text("owner_key").notNull(),
    keys: integer("keys").notNull(),
    bytes: integer("bytes").notNull(),
  },
  (t) => [primaryKey({ columns: [t.area, t.ownerKey] })],
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
