import type { McpSessionPool } from "../../resources/mcp";
import type { OpenStreams } from "../open-streams";
import type { DenialCount } from "../denial-cap";
import type { Db } from "../../db/client";
import type { Config } from "../../env";
import { decodeCursor, decodeCursorOf, decodeKeyCursor, InvalidCursorError } from "../../lib/cursor";
import type { HostApiAction, HostApiParams } from "../../protocol/host-api";
import type { SteeringInputItem } from "../../protocol/host-api-results";
import type { AuthorizationSnapshot } from "../../run/snapshot";
import type { WriteBudget } from "../../lib/write-budget";
import { ApiError, denied } from "../errors";

/** The run's steering queue, owned by its Durable Object (PROTOCOL §10). */
export interface SteeringPort {
  pull(mode: "all" | "one-at-a-time", limit: number | undefined): Promise<SteeringInputItem[]>;
}

/** Host-made records in the run ledger (origin "host"), numbered in step with the run's results. */
export interface LedgerPort {
  /** `alongside`: statements written in the same round trip (written alone once the ledger takes no more). */
  append(entries: { type: string; data: Record<string, unknown> }[], alongside?: unknown[]): Promise<void>;
}

/** What every action sees: the run's frozen snapshot and the host's stores. */
export interface ActionContext {
  db: Db;
  config: Config;
  snapshot: AuthorizationSnapshot;
  artifacts: R2Bucket;
  steering: SteeringPort;
  ledger: LedgerPort;
  /** The run's denials so far: only the first are recorded (denial-cap.ts). */
  denials: DenialCount;
  /** Aborted when the run is cancelled, interrupted or passes its deadline: in-flight upstream calls stop. */
  signal: AbortSignal;
  /** The run's MCP sessions, kept from one tool call to the next until the run ends. */
  mcp: McpSessionPool;
  /** The run's streamed answers still open, closable by the Worker when their reader goes away. */
  streams: OpenStreams;
  /** The run's state writes so far, its results' included: `state.set` takes from the same RUN_MAX_STATE_UPDATES. */
  stateWrites: WriteBudget;
  /** The run's `storage.set` calls so far, against RUN_MAX_STORAGE_WRITES. */
  storageWrites: WriteBudget;
}

export type Handler<A extends HostApiAction> = (ctx: ActionContext, params: HostApiParams<A>) => Promise<unknown>;
/** A group of handlers, one module per API group. */
export type ActionTable = { [A in HostApiAction]?: Handler<A> };

/** A cursor's position in a listing of this run's conversation. */
export function cursorSeq(ctx: ActionContext, kind: "e", cursor: string | null | undefined): number | undefined {
  return cursor ? invalidArgumentOnBadCursor(() => decodeCursor(kind, cursor, ctx.snapshot.conversationKey)) : undefined;
}

/**
 * Where a history cursor stands, as the exclusive bounds the transcript is
 * paged by: on item N (`t`) both are N; in the gap just after item N (`g`),
 * item N is before it and not after it.
 */
export function historyBounds(ctx: ActionContext, cursor: string | null | undefined): { before: number; after: number } | undefined {
  if (!cursor) return undefined;
  const { kind, seq } = invalidArgumentOnBadCursor(() => decodeCursorOf(["t", "g"], cursor, ctx.snapshot.conversationKey));
  return kind === "t" ? { before: seq, after: seq } : { before: seq + 1, after: seq };
}

function invalidArgumentOnBadCursor<T>(decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    if (err instanceof InvalidCursorError) throw new ApiError("invalid_argument", err.message);
    throw err;
  }
}

/** The last key of the previous page, from an opaque key cursor (state.list, storage.keys). */
export function afterKeyOf(cursor: string | null | undefined): string | undefined {
  if (!cursor) return undefined;
  try {
    return decodeKeyCursor(cursor);
  } catch (cause) {
    // Bad base64 or bad UTF-8 throw platform errors, not InvalidCursorError: all mean the same.
    throw new ApiError("invalid_argument", "cursor is not valid", { cause });
  }
}

/** Scope check: only this run's conversation unless the snapshot grants more (it does not in v1). */
export function ownConversation(ctx: ActionContext, conversationId: string | null | undefined, what: string) {
  if (conversationId && conversationId !== ctx.snapshot.conversationId) {
    throw denied(`this run may not read ${what} of another conversation`, { conversation_id: conversationId });
  }
}
