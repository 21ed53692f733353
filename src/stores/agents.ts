import { and, eq, inArray } from "drizzle-orm";
import type { Db } from "../db/client";
import { agent, agentBinding, runnerState } from "../db/schema";
import { DbError } from "../db/executor";
import { scopeView } from "../agents/policy";
import { maskSecretFields } from "../agents/runner-config";
import { iso, parseJson } from "../lib/json";

export type AgentRow = typeof agent.$inferSelect;
export type NewAgentRow = typeof agent.$inferInsert;

/** Admin view: runner_config fields the runner declares secret are masked (`secrets`: their names, see maskSecretFields). */
export function toAgentView(row: AgentRow, secrets: ReadonlySet<string> | "all") {
  return {
    agent_id: row.agentId,
    name: row.name,
    description: row.description ?? undefined,
    runner_id: row.runnerId,
    runner_config: maskSecretFields(parseJson<Record<string, unknown>>(row.runnerConfigJson, {}), secrets),
    event_types: parseJson<string[]>(row.eventTypesJson, []),
    scope: scopeView(row.scopeType, row.scopeId),
    resource_policy: parseJson<Record<string, unknown>>(row.resourcePolicyJson, {}),
    state_policy: parseJson<Record<string, unknown>>(row.statePolicyJson, {}),
    delivery_policy: parseJson<Record<string, unknown>>(row.deliveryPolicyJson, {}),
    concurrency: parseJson<Record<string, unknown>>(row.concurrencyJson, {}),
    enabled: row.enabled,
    created_at: iso(row.createdAt),
    updated_at: iso(row.updatedAt),
  };
}

/** A write refused because another enabled agent already binds the same scope and event type. */
export class BindingConflictError extends Error {
  override readonly name = "BindingConflictError";
  constructor(readonly conflicts: { agentId: string; eventType: string }[], options?: { cause?: unknown }) {
    super(
      `another enabled agent already binds this scope for: ${conflicts.map((c) => `${c.eventType} (agent ${c.agentId})`).join(", ") || "an overlapping event type"}`,
      options,
    );
  }
}

export function agentsStore(db: Db) {
  const b = agentBinding;

  function bindingRows(row: NewAgentRow) {
    if (!row.enabled) return [];
    const eventTypes = parseJson<string[]>(row.eventTypesJson, []);
    return eventTypes.map((eventType) => db.insert(b).values({ scopeType: row.scopeType, scopeId: row.scopeId, eventType, agentId: row.agentId }));
  }

  async function conflictsFor(row: NewAgentRow) {
    const eventTypes = parseJson<string[]>(row.eventTypesJson, []);
    const rows = await db
      .select()
      .from(b)
      .where(and(eq(b.scopeType, row.scopeType), eq(b.scopeId, row.scopeId), inArray(b.eventType, eventTypes)))
      .all();
    return rows.filter((r) => r.agentId !== row.agentId).map((r) => ({ agentId: r.agentId, eventType: r.eventType }));
  }

  /** Run a write batch; a binding key violation becomes a BindingConflictError naming the other agent. */
  async function write(row: NewAgentRow, statements: Parameters<Db["batch"]>[0]) {
    try {
      await db.batch(statements);
    } catch (err) {
      if (err instanceof DbError && err.isConstraintViolation && /agent_binding/.test(err.message)) {
        throw new BindingConflictError(await conflictsFor(row), { cause: err });
      }
      throw err;
    }
  }

  return {
    get: (agentId: string) => db.select().from(agent).where(eq(agent.agentId, agentId)).get(),
    list: () => db.select().from(agent).orderBy(agent.createdAt).all(),

    async create(row: NewAgentRow) {
      await write(row, [db.insert(agent).values(row), ...bindingRows(row)]);
    },
    async replace(row: NewAgentRow) {
      // What the agent was created as stays: its creation time, and its state epoch (its state stays its own).
      const { agentId, createdAt: _createdAt, stateEpoch: _stateEpoch, ...rest } = row;
      await write(row, [
        db.delete(b).where(eq(b.agentId, agentId)),
        db.update(agent).set(rest).where(eq(agent.agentId, agentId)),
        ...bindingRows(row),
      ]);
    },
    /** With its bindings and the state it wrote. */
    async remove(agentId: string) {
      await db.batch([db.delete(b).where(eq(b.agentId, agentId)), db.delete(agent).where(eq(agent.agentId, agentId)), db.delete(runnerState).where(eq(runnerState.agentId, agentId))]);
    },
  };
}
