/**
 * Opaque cursors. Runners must not parse them; the host encodes a kind and a
 * sequence number so a cursor from one listing is refused by another: `t` a
 * transcript item, `e` an EventLog row, `r` a run ledger position, `g` the
 * gap just after a transcript item (the `latest_cursor` of an event that has
 * no item of its own).
 */
export type CursorKind = "t" | "e" | "r" | "g";

export function encodeCursor(kind: CursorKind, seq: number): string {
  return btoa(`${kind}:${seq}`).replace(/=+$/, "");
}

export class InvalidCursorError extends Error {
  override readonly name = "InvalidCursorError";
}

export function decodeCursor(kind: CursorKind, cursor: string): number {
  return decodeCursorOf([kind], cursor).seq;
}

/** A cursor of any of `kinds`, with the kind it is. */
export function decodeCursorOf<K extends CursorKind>(kinds: readonly K[], cursor: string): { kind: K; seq: number } {
  let text: string;
  try {
    text = atob(cursor);
  } catch (cause) {
    throw new InvalidCursorError("cursor is not valid", { cause });
  }
  // Exactly what encodeCursor writes: `Number` alone would read "", " 2" or "0x2" as positions.
  const match = /^([a-z]):(\d{1,15})$/.exec(text);
  if (!match || !(kinds as readonly string[]).includes(match[1])) throw new InvalidCursorError("cursor is not valid for this listing");
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
