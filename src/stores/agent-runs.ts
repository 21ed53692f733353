import { and, asc, count, eq, gt, inArray, isNull, or } from "drizzle-orm";
import type { Db } from "../db/client";
import { run } from "../db/schema";
import { eqUnindexed } from "../db/unindexed";
import { NOT_STARTED } from "./runs";

/** Which of an agent's runs not ended: those running, or those not started yet. */
export type UnendedKind = "running" | "not_started";

/** The agent as created: its id and its state epoch (ingress records `''` for an agent without one, null before migration 0016). */
export interface AgentAsCreated {
  agentId: string;
  stateEpoch: string | null;
}

export interface RunPosition {
  createdAt: number;
  runId: string;
}

const statusesOf = (kind: UnendedKind) => (kind === "running" ? ["running"] : [...NOT_STARTED]);

/**
 * Runs the agent bound as created: never those of another agent created later under its id. Not read by run_agent,
 * which holds every run the agent had, ended or not: the status term reads the few not ended from run_status.
 */
const boundBy = (agent: AgentAsCreated) => and(eqUnindexed(run.agentId, agent.agentId), or(eq(run.agentEpoch, agent.stateEpoch ?? ""), isNull(run.agentEpoch)));

/** An agent's runs not ended, read through the `run_status` index (only unended runs are scanned, however many ended). */
export function agentRunsStore(db: Db) {
  const where = (agent: AgentAsCreated, kind: UnendedKind, after: RunPosition | null) =>
    and(inArray(run.status, statusesOf(kind)), boundBy(agent), after ? or(gt(run.createdAt, after.createdAt), and(eq(run.createdAt, after.createdAt), gt(run.runId, after.runId))) : undefined);
  return {
    /** A page of them, oldest first, after a (created_at, run_id) position. */
    page: (agent: AgentAsCreated, kind: UnendedKind, after: RunPosition | null, limit: number): Promise<RunPosition[]> =>
      db.select({ runId: run.runId, createdAt: run.createdAt }).from(run).where(where(agent, kind, after)).orderBy(asc(run.createdAt), asc(run.runId)).limit(limit).all(),

    /** How many there are after a position. */
    async count(agent: AgentAsCreated, kind: UnendedKind, after: RunPosition | null = null): Promise<number> {
      const [row] = await db.select({ n: count() }).from(run).where(where(agent, kind, after)).all();
      return Number(row?.n ?? 0);
    },
  };
}
