import { and, asc, eq, sql, type Placeholder, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { compiled, param } from "../db/compiled";
import { insertFromWhereReturning } from "../db/guarded";
import { runnerState, runnerStateUsage } from "../db/schema";
import { asRoom, fitsRoom, jsonBytes, NEW_VALUE, ROOM, roomQuery, roomValues, type DataCap, type Room, type RoomParts } from "./data-caps";
import { sha256Hex } from "../lib/crypto";
import { parseJson } from "../lib/json";
import type { StateScope } from "../protocol/context";
import { keyPage, type KeyPageOptions } from "./key-page";
import { runningBytes } from "../db/byte-budget";
import { whileRunning } from "./while-running";


/** Who writes a state value: its runner, and the agent whose deletion deletes it. */
export interface StateOwner {
  runnerId: string;
  agentId: string;
  /** The agent as created (its state epoch): once it is deleted, nothing more is written for it, whoever has its id since. */
  agentEpoch: string | null;
}

export interface ScopeIdentity {
  runnerId: string;
  /** The binding identity: the agent whose run this is, in the event's workspace. */
  agentId: string;
  /** The agent's state epoch (null for agents created before there was one: their keys stay as they were). */
  stateEpoch?: string | null;
  workspaceId?: string | null;
  botId?: string | null;
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
 * The binding is the agent as created: its id and its state epoch, so an
 * agent created again under a deleted one's id never reads that one's state.
 * The binding includes the workspace so that one agent bound globally never
 * shares state between tenants; a conversation is identified as everywhere
 * else in the host (bot, conversation, thread), since conversation ids are
 * only unique per bot.
 */
export async function stateScopeKey(scope: StateScope, id: ScopeIdentity): Promise<string | null> {
  let identity: unknown[];
  switch (scope) {
    case "conversation":
      if (!id.conversationId) return null;
      identity = [id.botId ?? null, id.conversationId, id.threadId ?? null];
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
  const binding = id.stateEpoch ? [id.runnerId, id.agentId, id.stateEpoch] : [id.runnerId, id.agentId];
  const input = JSON.stringify([...binding, id.workspaceId ?? null, scope, ...identity]);
  let key = scopeKeys.get(input);
  if (!key) {
    if (scopeKeys.size >= SCOPE_KEY_CACHE_SIZE) scopeKeys.clear();
    key = sha256Hex(input);
    scopeKeys.set(input, key);
  }
  return key;
}

/** Keys already hashed (a conversation's runs ask for the same few again and again); ids only, no secrets. */
const scopeKeys = new Map<string, Promise<string>>();
const SCOPE_KEY_CACHE_SIZE = 1024;

/** Seeded into the conversation scope when absent (§9): the host's conversation id. */
export const SEEDED_CONVERSATION_ID_KEY = "external.conversation_id";

/** The context carries at most this many keys per scope; runners page the rest with state.list. */
export const SNAPSHOT_KEYS_PER_SCOPE = 100;
/**
 * And at most this many bytes of values per scope (values are up to 256 KiB
 * each): the context, and the run's memory, stay small whatever a runner
 * stored. The keys past the budget are read with state.get.
 */
export const SNAPSHOT_BYTES_PER_SCOPE = 1024 * 1024;

const s = runnerState;
const newValue = () => ({ scopeKey: param("scopeKey"), key: param("key"), runnerId: param("runnerId"), agentId: param("agentId"), agentEpoch: param("agentEpoch"), scope: param("scope"), valueJson: param("valueJson"), updatedAt: param("updatedAt") });
/**
 * A scope's first keys, one past the key limit, each with its value while the
 * running total of value bytes stays in the budget (null after): the cut is
 * made in the database, so values past it never travel, and the extra row
 * tells that the scope has more.
 */
const scopeSnapshot = compiled((db) => {
  const first = db.select({ key: s.key, valueJson: s.valueJson }).from(s).where(eq(s.scopeKey, param("scopeKey"))).orderBy(asc(s.key)).limit(param("scanned")).as("first");
  const running = db
    .select({
      key: first.key,
      valueJson: first.valueJson,
      bytes: runningBytes(first.valueJson, first.key).as("bytes"),
      n: sql<number>`row_number() over (order by ${first.key})`.as("n"),
    })
    .from(first)
    .as("running");
  return db
    .select({ key: running.key, valueJson: sql<string | null>`case when ${running.bytes} <= ${param("maxBytes")} and ${running.n} <= ${param("keys")} then ${running.valueJson} end` })
    .from(running)
    .orderBy(asc(running.key));
});
const u = runnerStateUsage;
/** How a capped write reads a scope's usage and a key's present size (data-caps.ts). */
const roomOf = (scopeKey: SQL | Placeholder, key: SQL | Placeholder): RoomParts => ({
  keys: sql`SELECT ${u.keys} FROM ${u} WHERE ${u.scopeKey} = ${scopeKey}`,
  bytes: sql`SELECT ${u.bytes} FROM ${u} WHERE ${u.scopeKey} = ${scopeKey}`,
  oldSize: sql`SELECT ${jsonBytes(s.valueJson)} FROM ${s} WHERE ${s.scopeKey} = ${scopeKey} AND ${s.key} = ${key}`,
});
// The host's own seed is written whatever the scope holds: one key per conversation scope, counted with the others.
const seed = compiled((db) => db.insert(s).values(newValue()).onConflictDoNothing());
/** A runner's write: applied only if it fits the scope's cap when it runs (its one row says it was written), and `also` holds. */
const cappedUpsertWhere = (also: SQL) =>
  compiled((db) =>
    insertFromWhereReturning(
      db,
      s,
      { ...newValue(), valueJson: NEW_VALUE },
      { name: ROOM, query: roomQuery(roomOf(param("scopeKey"), param("key")), param("valueJson")) },
      sql`(${fitsRoom(jsonBytes(NEW_VALUE), { maxKeys: param("maxKeys"), maxBytes: param("maxBytes") })}) AND ${also}`,
      sql`ON CONFLICT (${sql.identifier(s.scopeKey.name)}, ${sql.identifier(s.key.name)}) DO UPDATE SET ${sql.identifier(s.valueJson.name)} = excluded.${sql.identifier(s.valueJson.name)}, ${sql.identifier(s.updatedAt.name)} = excluded.${sql.identifier(s.updatedAt.name)}`,
      sql`1`,
    ),
  );
const cappedUpsert = cappedUpsertWhere(sql`1`);
/** A run's result (execute.ts): landing after the run's end (whileRunning), it sets nothing. */
const cappedUpsertWhileRunning = cappedUpsertWhere(whileRunning(param("runId")));
// `all`, not `get`: drizzle takes a raw `get` of a batch as the first value of its row (sqlite-proxy), not the row.
const room = compiled((db) => db.all<unknown[]>(sql`SELECT ${roomValues(roomOf(param("scopeKey"), param("key")))}`));

/** A key's place in `rooms`' answer: keys hold no NUL (checked on the way in), so the pair is unambiguous. */
export const roomKey = (scopeKey: string, key: string) => `${scopeKey}\0${key}`;

export function stateStore(db: Db) {
  return {
    /** The first keys of one scope, for the context's snapshot: one query per scope, batched by the caller. */
    scopeSnapshotQuery: (scopeKey: string, keys = SNAPSHOT_KEYS_PER_SCOPE, maxBytes = SNAPSHOT_BYTES_PER_SCOPE) =>
      scopeSnapshot(db, { scopeKey, keys, scanned: keys + 1, maxBytes }),
    /** The snapshot of a scope from its query's rows, and whether it holds the whole scope. */
    snapshotOf(rows: { key: string; valueJson: string | null }[]): { values: Record<string, unknown>; complete: boolean } {
      const kept = rows.filter((r): r is { key: string; valueJson: string } => r.valueJson !== null);
      return { values: Object.fromEntries(kept.map((r) => [r.key, parseJson<unknown>(r.valueJson, null)])), complete: kept.length === rows.length };
    },
    /** Write a value only if the key is absent: never overwrites what a runner stored. */
    seedStatement: (scopeKey: string, key: string, owner: StateOwner, scope: StateScope, valueJson: string) =>
      seed(db, { scopeKey, key, ...owner, scope, valueJson, updatedAt: Date.now() }),
    async get(scopeKey: string, key: string): Promise<unknown | undefined> {
      const row = await db.select().from(s).where(and(eq(s.scopeKey, scopeKey), eq(s.key, key))).get();
      return row ? parseJson<unknown>(row.valueJson, null) : undefined;
    },
    /**
     * The write of one key, within the scope's cap (data-caps.ts): answers a row when written, none when it did not fit
     * (or the agent is gone, 0014). With `whileRunOf`, a run's result: only while that run is running.
     */
    setStatement: (scopeKey: string, key: string, owner: StateOwner, scope: StateScope, valueJson: string, cap: DataCap, whileRunOf?: string) => {
      const values = { scopeKey, key, ...owner, scope, valueJson, updatedAt: Date.now(), ...cap };
      return whileRunOf === undefined ? cappedUpsert(db, values) : cappedUpsertWhileRunning(db, { ...values, runId: whileRunOf });
    },
    /** The scope's usage and the key's size (one row), read in the batch of a setStatement to tell why it wrote nothing. */
    roomStatement: (scopeKey: string, key: string) => room(db, { scopeKey, key }),
    /**
     * The rooms of many keys at once (a run's batch of state.updated results), in one query, by `roomKey`.
     */
    async rooms(pairs: { scopeKey: string; key: string }[]): Promise<Map<string, Room>> {
      const pair = sql.identifier("pair");
      const [scopeKey, key] = [sql`json_extract(${pair}.value, '$[0]')`, sql`json_extract(${pair}.value, '$[1]')`];
      const list = JSON.stringify(pairs.map((p) => [p.scopeKey, p.key]));
      const rows = await db.all<unknown[]>(sql`SELECT ${scopeKey}, ${key}, ${roomValues(roomOf(scopeKey, key))} FROM json_each(${list}) AS ${pair}`);
      return new Map(rows.map(([sk, k, ...values]) => [roomKey(String(sk), String(k)), asRoom(values)]));
    },
    deleteStatement(scopeKey: string, key: string) {
      return db.delete(s).where(and(eq(s.scopeKey, scopeKey), eq(s.key, key)));
    },
    list: (scopeKey: string, opts: KeyPageOptions) => keyPage(db, s, s.key, [eq(s.scopeKey, scopeKey)], opts),
  };
}
