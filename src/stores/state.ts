import { and, asc, eq, gt, gte, inArray, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { runnerState } from "../db/schema";
import { sha256Hex } from "../lib/crypto";
import { parseJson } from "../lib/json";
import type { StateScope } from "../protocol/context";
import { prefixUpperBound } from "../lib/key-range";


export interface ScopeIdentity {
  runnerId: string;
  /** The binding identity: the agent whose run this is. */
  agentId: string;
  conversationId?: string | null;
  threadId?: string | null;
  actorType?: string | null;
  actorId?: string | null;
  subjectType?: string | null;
  subjectId?: string | null;
}

/**
 * PROTOCOL §9: hash of (runner, binding, scope identity). A scope whose
 * identity the event lacks has no key, so it is unavailable for the run.
 */
export async function stateScopeKey(scope: StateScope, id: ScopeIdentity): Promise<string | null> {
  let identity: unknown[];
  switch (scope) {
    case "conversation":
      if (!id.conversationId) return null;
      identity = [id.conversationId, id.threadId ?? null];
      break;
    case "actor":
      if (!id.actorType || !id.actorId) return null;
      identity = [id.actorType, id.actorId];
      break;
    case "subject":
      if (!id.subjectType || !id.subjectId) return null;
      identity = [id.subjectType, id.subjectId];
      break;
    case "runner":
      identity = [];
      break;
  }
  return sha256Hex(JSON.stringify([id.runnerId, id.agentId, scope, ...identity]));
}

/** The context carries at most this many keys per scope; runners page the rest with state.list. */
export const SNAPSHOT_KEYS_PER_SCOPE = 100;

export function stateStore(db: Db) {
  const s = runnerState;
  return {
    /** Snapshot of several scopes at once: one query, to batch with others. */
    snapshotQuery(scopeKeys: string[], perScopeLimit = SNAPSHOT_KEYS_PER_SCOPE) {
      return db.select().from(s).where(inArray(s.scopeKey, scopeKeys)).orderBy(asc(s.key)).limit(perScopeLimit * Math.max(1, scopeKeys.length));
    },
    snapshotOf(rows: (typeof runnerState.$inferSelect)[], scopeKeys: string[], perScopeLimit = SNAPSHOT_KEYS_PER_SCOPE) {
      const out = new Map<string, Record<string, unknown>>(scopeKeys.map((k) => [k, {}]));
      for (const row of rows) {
        const bucket = out.get(row.scopeKey)!;
        if (Object.keys(bucket).length < perScopeLimit) bucket[row.key] = parseJson<unknown>(row.valueJson, null);
      }
      return out;
    },
    async get(scopeKey: string, key: string): Promise<unknown | undefined> {
      const row = await db.select().from(s).where(and(eq(s.scopeKey, scopeKey), eq(s.key, key))).get();
      return row ? parseJson<unknown>(row.valueJson, null) : undefined;
    },
    setStatement(scopeKey: string, key: string, runnerId: string, scope: StateScope, valueJson: string) {
      const updatedAt = Date.now();
      return db
        .insert(s)
        .values({ scopeKey, key, runnerId, scope, valueJson, updatedAt })
        .onConflictDoUpdate({ target: [s.scopeKey, s.key], set: { valueJson, updatedAt } });
    },
    deleteStatement(scopeKey: string, key: string) {
      return db.delete(s).where(and(eq(s.scopeKey, scopeKey), eq(s.key, key)));
    },
    async list(scopeKey: string, opts: { prefix?: string; afterKey?: string; limit: number }) {
      const conds = [eq(s.scopeKey, scopeKey)];
      // A key range rather than LIKE: exact for any characters, and an index range scan.
      if (opts.prefix) {
        conds.push(gte(s.key, opts.prefix));
        const bound = prefixUpperBound(opts.prefix);
        if (bound !== undefined) conds.push(lt(s.key, bound));
      }
      if (opts.afterKey) conds.push(gt(s.key, opts.afterKey));
      const rows = await db.select({ key: s.key }).from(s).where(and(...conds)).orderBy(asc(s.key)).limit(opts.limit + 1).all();
      return { keys: rows.slice(0, opts.limit).map((r) => r.key), hasMore: rows.length > opts.limit };
    },
  };
}
