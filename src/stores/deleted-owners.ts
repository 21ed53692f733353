import { and, asc, eq, isNull, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { insertWhere } from "../db/guarded";
import { agent, deletedOwner, runnerService, runnerState, storage } from "../db/schema";

/**
 * What a deleted agent or runner service left behind: its state or plugin storage, which nobody can reach once it is
 * deleted (an agent created again under its id has a new state epoch, a service registered again a new id) and which
 * runs still going no longer write (migrations 0012 to 0014). The DELETE notes it here; retention deletes it.
 */
export type DeletedOwner = typeof deletedOwner.$inferSelect;
export type DeletedOwnerKind = "agent_state" | "plugin_storage";

/** Owners whose rows one statement deletes together: the oldest notes of a kind, most of them with few rows or none. */
const OWNERS_PER_STATEMENT = 100;

/** In the DELETE's batch, before the agent's row goes: notes it as it is (its state epoch), only if it is there. */
export function noteDeletedAgent(db: Db, agentId: string, stateEpoch: string | null) {
  // Only the agent as the DELETE read it (IS: an agent created before epochs has none): one deleted and created anew
  // under its id meanwhile is another's to note.
  const there = sql`EXISTS (SELECT 1 FROM ${agent} WHERE ${agent.agentId} = ${agentId} AND ${agent.stateEpoch} IS ${stateEpoch})`;
  return insertWhere(db, deletedOwner, { kind: "agent_state" satisfies DeletedOwnerKind, ownerId: agentId, epoch: stateEpoch, deletedAt: Date.now() }, there);
}

/** In the DELETE's batch, before the service's row goes. */
export function noteDeletedService(db: Db, serviceId: string) {
  const there = sql`EXISTS (SELECT 1 FROM ${runnerService} WHERE ${runnerService.serviceId} = ${serviceId})`;
  return insertWhere(db, deletedOwner, { kind: "plugin_storage" satisfies DeletedOwnerKind, ownerId: serviceId, epoch: null, deletedAt: Date.now() }, there);
}

/**
 * The owner's rows still left, one condition per index range. An agent's state: the rows of its epoch, and those
 * written without one (before migration 0014, or by an agent created before 0009); never those of the agent of that id
 * as it is now, another one created since (a new epoch).
 */
function rangesOf(owner: DeletedOwner): SQL[] {
  if (owner.kind === "plugin_storage") {
    const gone = sql`NOT EXISTS (SELECT 1 FROM ${runnerService} WHERE ${runnerService.serviceId} = ${owner.ownerId})`;
    return [sql`${and(eq(storage.area, "plugin"), eq(storage.ownerKey, owner.ownerId), gone)}`];
  }
  const notLive = sql`NOT EXISTS (SELECT 1 FROM ${agent} WHERE ${agent.agentId} = ${runnerState.agentId} AND ${agent.stateEpoch} IS ${runnerState.agentEpoch})`;
  const epochs = [...(owner.epoch === null ? [] : [eq(runnerState.agentEpoch, owner.epoch)]), isNull(runnerState.agentEpoch)];
  return epochs.map((epoch) => sql`${and(eq(runnerState.agentId, owner.ownerId), epoch, notLive)}`);
}

const TABLES = {
  agent_state: { table: runnerState, rowid: sql.raw(`"runner_state"."rowid"`) },
  plugin_storage: { table: storage, rowid: sql.raw(`"storage"."rowid"`) },
} as const;

export function deletedOwnersStore(db: Db) {
  return {
    /**
     * Deletes at most `limit` rows of the oldest owners of a kind, in one statement (one index range after the other,
     * oldest owner first), and, in the same round trip, the note of each owner with none left. Answers how many rows
     * went, or null when no owner of the kind is noted.
     */
    async deleteSome(kind: DeletedOwnerKind, limit: number): Promise<number | null> {
      const owners = await db.select().from(deletedOwner).where(eq(deletedOwner.kind, kind)).orderBy(asc(deletedOwner.seq)).limit(OWNERS_PER_STATEMENT).all();
      if (!owners.length) return null;
      const { table, rowid } = TABLES[kind];
      const ranges = owners.map(rangesOf);
      const picks = sql.join(ranges.flat().map((range) => sql`SELECT ${rowid} FROM ${table} WHERE ${range}`), sql` UNION ALL `);
      const left = (own: SQL[]) => sql.join(own.map((range) => sql`EXISTS (SELECT 1 FROM ${table} WHERE ${range})`), sql` OR `);
      const [rows] = await db.batch([
        db.all(sql`DELETE FROM ${table} WHERE ${rowid} IN (${picks} LIMIT ${limit}) RETURNING 1`),
        ...owners.map((owner, i) => db.delete(deletedOwner).where(and(eq(deletedOwner.seq, owner.seq), sql`NOT (${left(ranges[i])})`))),
      ]);
      return (rows as unknown[]).length;
    },
  };
}
