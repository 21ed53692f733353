import { and, eq, inArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { agent, agentBinding, runner } from "../db/schema";
import { noteDeletedAgent } from "./deleted-owners";
import { runnerServiceAt } from "./registry";
import { insertWhereReturning } from "../db/guarded";
import { DbError } from "../db/executor";
import { scopeView, TriggerPolicySchema } from "../agents/policy";
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
    // With its defaults: an agent saved before there was one answers every group message, as the view says.
    trigger_policy: TriggerPolicySchema.parse(parseJson(row.triggerPolicyJson, {})),
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
  const onRunnersOf = (serviceId: string) => inArray(agent.runnerId, db.select({ runnerId: runner.runnerId }).from(runner).where(eq(runner.serviceId, serviceId)));

  /**
   * The agent's bindings, written only while its row binds as `row` does (scope, event types, enabled): after a write of
   * the row that did not apply (it changed meanwhile), the bindings of the row as it is stay.
   */
  function bindingRows(row: NewAgentRow) {
    const bindsSo = sql`EXISTS (SELECT 1 FROM ${agent} WHERE ${and(eq(agent.agentId, row.agentId), eq(agent.scopeType, row.scopeType), eq(agent.scopeId, row.scopeId), eq(agent.eventTypesJson, row.eventTypesJson), eq(agent.enabled, row.enabled))})`;
    const eventTypes = row.enabled ? parseJson<string[]>(row.eventTypesJson, []) : [];
    return [
      db.delete(b).where(and(eq(b.agentId, row.agentId), bindsSo)),
      ...eventTypes.map((eventType) => insertWhereReturning(db, b, { scopeType: row.scopeType, scopeId: row.scopeId, eventType, agentId: row.agentId }, bindsSo, sql`1`)),
    ];
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

  /** Run a write batch (its first statement answers the rows it wrote); a binding key violation becomes a BindingConflictError naming the other agent. */
  async function write(row: NewAgentRow, statements: Parameters<Db["batch"]>[0]): Promise<boolean> {
    try {
      const [written] = await db.batch(statements);
      return (written as unknown[]).length > 0;
    } catch (err) {
      if (err instanceof DbError && err.isConstraintViolation && /agent_binding/.test(err.message)) {
        throw new BindingConflictError(await conflictsFor(row), { cause: err });
      }
      throw err;
    }
  }

  return {
    get: (agentId: string) => db.select().from(agent).where(eq(agent.agentId, agentId)).get(),
    /** The agents on one of a service's runners: at most `limit` of their ids (in id order), and how many there are. Read by runner, not every agent whole. */
    async onService(serviceId: string, limit: number): Promise<{ agentIds: string[]; total: number }> {
      const rows = await db.select({ agentId: agent.agentId, total: sql<number>`count(*) over ()` }).from(agent).where(onRunnersOf(serviceId)).orderBy(agent.agentId).limit(limit).all();
      return { agentIds: rows.map((r) => r.agentId), total: Number(rows[0]?.total ?? 0) };
    },
    /**
     * The runner and config of each agent on one of a service's runners, in creation order, for a refresh or move of
     * the service: found by runner (index agent_runner), without their other columns, never every agent.
     */
    configsOnService: (serviceId: string) =>
      db
        .select({ agentId: agent.agentId, runnerId: agent.runnerId, runnerConfigJson: agent.runnerConfigJson })
        .from(agent)
        .where(onRunnersOf(serviceId))
        .orderBy(agent.createdAt, agent.agentId)
        .all(),

    /**
     * Written only while the runner's service is at `sealedForUrl` (its secret fields were sealed for that address: a
     * move landing meanwhile resealed the agents it found, not this one). Answers whether it was written.
     */
    create: (row: NewAgentRow, sealedForUrl: string) =>
      write(row, [insertWhereReturning(db, agent, row, runnerServiceAt(row.runnerId, sealedForUrl), sql`${agent.agentId}`), ...bindingRows(row)]),
    /**
     * Over the row as read only (`read`: a concurrent PUT, a reseal or a move changed it meanwhile: not undone with what
     * was read before), and while the service is at `sealedForUrl`. Answers whether it was written.
     */
    replace(row: NewAgentRow, read: Pick<AgentRow, "updatedAt" | "runnerConfigJson" | "runnerId" | "stateEpoch">, sealedForUrl: string) {
      // What the agent was created as stays: its creation time, and its state epoch (its state stays its own).
      const { agentId, createdAt: _createdAt, stateEpoch: _stateEpoch, ...rest } = row;
      // The epoch too: an agent deleted and created anew under its id is never written over with what was read of the
      // old one, whatever its updated_at (IS: an agent created before epochs has none).
      const asRead = and(eq(agent.agentId, agentId), sql`${agent.stateEpoch} IS ${read.stateEpoch}`, eq(agent.updatedAt, read.updatedAt), eq(agent.runnerConfigJson, read.runnerConfigJson), eq(agent.runnerId, read.runnerId));
      return write(row, [db.update(agent).set(rest).where(and(asRead, runnerServiceAt(row.runnerId, sealedForUrl))).returning({ agentId: agent.agentId }), ...bindingRows(row)]);
    },
    /**
     * With its bindings; the state it wrote is noted for retention to delete (any amount of it: not in this batch). Only
     * the agent of this creation (`stateEpoch`): answers false when it was already gone, another perhaps created since
     * under its id, which stays.
     */
    async remove(agentId: string, stateEpoch: string | null): Promise<boolean> {
      // IS: an agent created before epochs (migration 0009) has none.
      const asRead = and(eq(agent.agentId, agentId), sql`${agent.stateEpoch} IS ${stateEpoch}`);
      const [, , removed] = await db.batch([
        noteDeletedAgent(db, agentId, stateEpoch),
        db.delete(b).where(and(eq(b.agentId, agentId), sql`EXISTS (SELECT 1 FROM ${agent} WHERE ${asRead})`)),
        db.delete(agent).where(asRead).returning({ agentId: agent.agentId }),
      ]);
      return removed.length > 0;
    },
  };
}
