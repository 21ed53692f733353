import { sql, type Placeholder, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Config } from "../env";

/**
 * What one state scope or one storage area may hold across runs: at most `maxKeys` keys and `maxBytes` bytes of values
 * (STATE_MAX_SCOPE_* and STORAGE_MAX_AREA_*). Checked in the statement that writes, against the usage row triggers
 * keep (migration 0027), so runs of other conversations writing the same scope at the same time never pass it together.
 */
export interface DataCap {
  maxKeys: number;
  maxBytes: number;
}

/** A scope's or area's usage, and the size of the key being written (null: absent), as a capped write reads them. */
export interface Room {
  keys: number;
  bytes: number;
  oldSize: number | null;
}

/** The cap a write would pass. */
export type CapPassed = "keys" | "bytes";

export const stateCap = (c: Pick<Config, "STATE_MAX_SCOPE_KEYS" | "STATE_MAX_SCOPE_BYTES">): DataCap => ({ maxKeys: c.STATE_MAX_SCOPE_KEYS, maxBytes: c.STATE_MAX_SCOPE_BYTES });
export const storageCap = (c: Pick<Config, "STORAGE_MAX_AREA_KEYS" | "STORAGE_MAX_AREA_BYTES">): DataCap => ({ maxKeys: c.STORAGE_MAX_AREA_KEYS, maxBytes: c.STORAGE_MAX_AREA_BYTES });

/**
 * Which cap a write of `size` bytes would pass, or null when it fits: a new key needs a key and its bytes free; an
 * overwrite only its growth, and one no larger always fits, so a full scope can still be rewritten and shrunk (and a
 * delete always goes through). The same rule as `fitsRoom`, which the database applies.
 */
export function capPassed(room: Room, size: number, cap: DataCap): CapPassed | null {
  if (room.oldSize === null) {
    if (room.keys >= cap.maxKeys) return "keys";
    return room.bytes + size > cap.maxBytes ? "bytes" : null;
  }
  return size <= room.oldSize || room.bytes - room.oldSize + size <= cap.maxBytes ? null : "bytes";
}

/** The name a capped write gives what it reads before writing (`roomQuery`), and its columns. */
export const ROOM = sql`${sql.identifier("room")}`;
const roomKeys = sql`${ROOM}.${sql.identifier("used_keys")}`;
const roomBytes = sql`${ROOM}.${sql.identifier("used_bytes")}`;
const roomOld = sql`${ROOM}.${sql.identifier("old_size")}`;
/**
 * The value a capped write writes, as its room carries it: the statement names its value once (the insert and the
 * guard's size read it here), not once per use, so a 256 KiB state value or a 1.3 MiB storage value is sent to the
 * database once, not four times.
 */
export const NEW_VALUE = sql`${ROOM}.${sql.identifier("new_value")}`;

/** How to read a room: scalar subqueries for the usage row's keys and bytes, and for the key's present size. */
export interface RoomParts {
  keys: SQL;
  bytes: SQL;
  oldSize: SQL;
}

/** A room's three values in order (keys, bytes, old size), 0 for a scope or area without a usage row. */
export const roomValues = (p: RoomParts): SQL => sql`coalesce((${p.keys}), 0), coalesce((${p.bytes}), 0), (${p.oldSize})`;

/**
 * What a capped write reads, with the names its guard reads, and the value it writes (NEW_VALUE): the write names it
 * in a MATERIALIZED common table expression, so each subquery runs once however often the guard names its result.
 */
export const roomQuery = (p: RoomParts, value: Placeholder): SQL =>
  sql`SELECT coalesce((${p.keys}), 0) AS ${sql.identifier("used_keys")}, coalesce((${p.bytes}), 0) AS ${sql.identifier("used_bytes")}, (${p.oldSize}) AS ${sql.identifier("old_size")}, ${value} AS ${sql.identifier("new_value")}`;

/** A room as the database gives its values (raw SQL: an array in roomValues' order). */
export const asRoom = ([keys, bytes, oldSize]: unknown[]): Room => ({ keys: Number(keys), bytes: Number(bytes), oldSize: oldSize === null || oldSize === undefined ? null : Number(oldSize) });

/** capPassed(room, size, cap) === null, in SQL over the room read: the guard of a capped write. */
export const fitsRoom = (size: SQL, cap: { maxKeys: Placeholder; maxBytes: Placeholder }): SQL =>
  sql`CASE WHEN ${roomOld} IS NULL THEN ${roomKeys} < ${cap.maxKeys} AND ${roomBytes} + ${size} <= ${cap.maxBytes} ELSE ${size} <= ${roomOld} OR ${roomBytes} - ${roomOld} + ${size} <= ${cap.maxBytes} END`;

/**
 * A state value's size as its scope counts it: the UTF-8 bytes of its JSON text (as STATE_VALUE_MAX_BYTES). Measured
 * with octet_length, which SQLite answers from a row's header without reading the value (up to 256 KiB, in overflow
 * pages): checking a write, or counting a table's rows (migration 0027), reads no value.
 */
export const jsonBytes = (text: SQLiteColumn | SQL | Placeholder): SQL<number> => sql<number>`octet_length(${text})`;

/**
 * A storage value's size as its area counts it: three bytes per four base64 characters (values are checked as padded
 * base64 on the way in), so its decoded size with its padding (at most 2 bytes) counted too. Read from the row's header
 * as jsonBytes is: finding the padding would read the whole value (up to 1.3 MiB).
 */
export const storedBytes = (b64: SQLiteColumn | SQL | Placeholder): SQL<number> => sql<number>`(octet_length(${b64}) / 4 * 3)`;

/** storedBytes of a value in hand (validated base64: ASCII, a multiple of 4 characters). */
export const storedBytesOf = (b64: string): number => (b64.length / 4) * 3;

/** What a capped write is of, for telling why it did not fit: the scope or area and the settings naming its caps. */
export interface CapSubject {
  /** e.g. `state scope actor`, `storage area plugin`. */
  what: string;
  settings: { keys: string; bytes: string };
  /** What names it in a refusal's details (`{scope}`, `{area}`). */
  names: Record<string, unknown>;
}

export const STATE_CAP_SETTINGS = { keys: "STATE_MAX_SCOPE_KEYS", bytes: "STATE_MAX_SCOPE_BYTES" };
export const STORAGE_CAP_SETTINGS = { keys: "STORAGE_MAX_AREA_KEYS", bytes: "STORAGE_MAX_AREA_BYTES" };

/**
 * Why a write of `size` bytes did not fit (`passed`), in words and as facts: the cap by its setting and value, and the
 * usage it met (what the answer or warning gives a runner to act on: delete keys, or shrink values).
 */
export function capRefusal(subject: CapSubject, passed: CapPassed, room: Room, size: number, cap: DataCap): { message: string; facts: Record<string, unknown> } {
  const setting = subject.settings[passed];
  const limit = passed === "keys" ? cap.maxKeys : cap.maxBytes;
  const why =
    passed === "keys"
      ? `${subject.what} holds ${room.keys} keys, and at most ${limit} are allowed (${setting})`
      : `${subject.what} holds ${room.bytes} bytes of values, and this ${size}-byte value${room.oldSize === null ? "" : ` in place of ${room.oldSize} bytes`} would take it past the ${limit} allowed (${setting})`;
  return {
    message: `${why}; nothing was written: delete keys to make room (a delete, and an overwrite with a value no larger, always go through)`,
    facts: { ...subject.names, setting, limit, keys: room.keys, bytes: room.bytes, value_bytes: size },
  };
}
