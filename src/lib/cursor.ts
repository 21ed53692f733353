/**
 * Opaque cursors. Runners must not parse them; the host encodes a kind, a
 * sequence number and a tag of the listing's owner (a conversation key, a run
 * id), so a cursor from one listing is refused by another instead of paging
 * it from a position that means nothing there: `t` a transcript item, `e` an
 * EventLog row, `r` a run ledger position, `g` the gap just after a
 * transcript item (the `latest_cursor` of an event that has no item of its own).
 */
export type CursorKind = "t" | "e" | "r" | "g";

/**
 * A short tag of a cursor's owner. It detects a cursor used on the wrong
 * listing; it guards nothing (every read is authorised on its own), so a
 * 32-bit FNV-1a, computed synchronously, is enough.
 */
function ownerTag(owner: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < owner.length; i++) {
    hash ^= owner.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(36);
}

/** `owner` is null for rows that belong to no listing's owner (an event without a conversation). */
export function encodeCursor(kind: CursorKind, seq: number, owner: string | null): string {
  return btoa(owner == null ? `${kind}:${seq}` : `${kind}:${seq}:${ownerTag(owner)}`).replace(/=+$/, "");
}

export class InvalidCursorError extends Error {
  override readonly name = "InvalidCursorError";
}

export function decodeCursor(kind: CursorKind, cursor: string, owner: string): number {
  return decodeCursorOf([kind], cursor, owner).seq;
}

/**
 * A cursor of any of `kinds` issued for `owner`'s listing, with the kind it
 * is. Cursors without a tag (issued before tags) are still read.
 */
export function decodeCursorOf<K extends CursorKind>(kinds: readonly K[], cursor: string, owner: string): { kind: K; seq: number } {
  let text: string;
  try {
    text = atob(cursor);
  } catch (cause) {
    throw new InvalidCursorError("cursor is not valid", { cause });
  }
  // Exactly what encodeCursor writes: `Number` alone would read "", " 2" or "0x2" as positions.
  const match = /^([a-z]):(\d{1,15})(?::([0-9a-z]{1,7}))?$/.exec(text);
  if (!match || !(kinds as readonly string[]).includes(match[1])) throw new InvalidCursorError("cursor is not valid for this listing");
  if (match[3] !== undefined && match[3] !== ownerTag(owner)) throw new InvalidCursorError("cursor was issued for another listing");
  // One of `kinds`, checked just above.
  return { kind: match[1] as K, seq: Number(match[2]) };
}

/** A cursor over string keys (state.list): the last key returned, UTF-8 then base64. */
export function encodeKeyCursor(key: string): string {
  let bin = "";
  for (const b of new TextEncoder().encode(`k:${key}`)) bin += String.fromCharCode(b);
  return btoa(bin);
}

export function decodeKeyCursor(cursor: string): string {
  const bin = atob(cursor);
  const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  if (!text.startsWith("k:")) throw new InvalidCursorError("cursor is not valid for this listing");
  return text.slice(2);
}

/** A cursor over a listing ordered by (time, id), newest first: the last row's position. */
export interface TimeIdPosition {
  time: number;
  id: string;
}

export function encodeTimeIdCursor(kind: string, pos: TimeIdPosition): string {
  return encodeKeyCursor(`${kind}:${pos.time}:${pos.id}`);
}

export function decodeTimeIdCursor(kind: string, cursor: string): TimeIdPosition {
  let text: string;
  try {
    text = decodeKeyCursor(cursor);
  } catch (cause) {
    throw new InvalidCursorError("cursor is not valid", { cause });
  }
  const match = /^([^:]+):(\d{1,15}):(.+)$/s.exec(text);
  // At most 15 digits: a time past any real one would lose precision (or become Infinity) on its way to SQL.
  if (!match || match[1] !== kind) throw new InvalidCursorError("cursor is not valid for this listing");
  return { time: Number(match[2]), id: match[3] };
}
