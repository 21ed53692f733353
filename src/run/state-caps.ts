import type { Db } from "../db/client";
import { utf8ByteLength } from "../protocol/common";
import { capPassed, capRefusal, STATE_CAP_SETTINGS, type DataCap } from "../stores/data-caps";
import { roomKey, stateStore } from "../stores/state";
import type { StateWrite } from "./result-batch";

/** A batch's `state.updated` write past its scope's cap: why, in words and facts, for its drop's warning and audit. */
export interface RefusedStateWrite {
  write: StateWrite;
  message: string;
  facts: Record<string, unknown>;
}

/**
 * Which of a batch's `state.updated` writes fit their scopes' caps: the scopes' usage and the keys' sizes are read
 * (one query) just before the batch is written, and the writes followed in order, each counted in as the database
 * will count it. One that does not fit is dropped with a warning, as an artifact reference the store refuses is, and
 * the run goes on: an actor's or the runner scope filled by the agent's runs in every conversation is no fault of
 * this run's answer. Those kept are written with their guard (stores/state.ts), so the cap holds whatever happens
 * between this read and the write; a write of another conversation's run landing in between and taking the last room
 * leaves such a write unwritten without a warning. A read that fails refuses nothing here: the guards still hold.
 */
export async function stateWritesWithinCaps(db: Db, writes: StateWrite[], cap: DataCap): Promise<{ kept: StateWrite[]; refused: RefusedStateWrite[] }> {
  if (!writes.length) return { kept: writes, refused: [] };
  const pairs = [...new Map(writes.map((w) => [roomKey(w.scopeKey, w.key), { scopeKey: w.scopeKey, key: w.key }])).values()];
  const rooms = await stateStore(db)
    .rooms(pairs)
    .catch(() => null);
  if (!rooms) return { kept: writes, refused: [] };
  // Every room of a scope read its usage in the same query: any of them gives it.
  const usage = new Map<string, { keys: number; bytes: number }>();
  const sizes = new Map<string, number | null>();
  for (const { scopeKey, key } of pairs) {
    const room = rooms.get(roomKey(scopeKey, key)) ?? { keys: 0, bytes: 0, oldSize: null };
    if (!usage.has(scopeKey)) usage.set(scopeKey, { keys: room.keys, bytes: room.bytes });
    sizes.set(roomKey(scopeKey, key), room.oldSize);
  }
  const kept: StateWrite[] = [];
  const refused: RefusedStateWrite[] = [];
  for (const write of writes) {
    const scope = usage.get(write.scopeKey)!;
    const at = roomKey(write.scopeKey, write.key);
    const oldSize = sizes.get(at) ?? null;
    const size = utf8ByteLength(write.valueJson);
    const room = { ...scope, oldSize };
    const passed = capPassed(room, size, cap);
    if (passed) {
      const subject = { what: `state scope ${write.scope}`, settings: STATE_CAP_SETTINGS, names: { scope: write.scope } };
      refused.push({ write, ...capRefusal(subject, passed, room, size, cap) });
      continue;
    }
    if (oldSize === null) scope.keys++;
    scope.bytes += size - (oldSize ?? 0);
    sizes.set(at, size);
    kept.push(write);
  }
  return { kept, refused };
}
