import type { Db } from "../db/client";
import type { Config } from "../env";
import { decodeCursor, decodeKeyCursor, encodeKeyCursor, InvalidCursorError } from "../lib/cursor";
import type { HostApiAction, HostApiParams } from "../protocol/host-api";
import type { StateScope } from "../protocol/context";
import type { AuthorizationSnapshot } from "../run/snapshot";
import { eventLogStore, toEventRecord } from "../stores/event-log";
import { stateStore } from "../stores/state";
import { toTranscriptItem, transcriptStore } from "../stores/transcript";
import { ApiError, denied } from "./errors";

export interface ActionContext {
  db: Db;
  config: Config;
  snapshot: AuthorizationSnapshot;
}

type Handler<A extends HostApiAction> = (ctx: ActionContext, params: HostApiParams<A>) => Promise<unknown>;

function cursorSeq(kind: "t" | "e", cursor: string | null | undefined): number | undefined {
  if (!cursor) return undefined;
  try {
    return decodeCursor(kind, cursor);
  } catch (err) {
    if (err instanceof InvalidCursorError) throw new ApiError("invalid_argument", err.message);
    throw err;
  }
}

/** Scope check: only this run's conversation unless the snapshot grants more (it does not in v1). */
function ownConversation(ctx: ActionContext, conversationId: string | null | undefined, what: string) {
  if (conversationId && conversationId !== ctx.snapshot.conversationId) {
    throw denied(`${what} of another conversation is not readable by this run`, { conversation_id: conversationId });
  }
}

function stateScopeKey(ctx: ActionContext, scope: StateScope): string {
  const key = ctx.snapshot.stateScopes[scope];
  if (!key) throw denied(`state scope "${scope}" is not enabled for this run`, { scope });
  return key;
}

const historyPage: Handler<"history.page"> = async (ctx, p) => {
  ownConversation(ctx, p.conversation_id, "history");
  const { rows, hasMore } = await transcriptStore(ctx.db).page(ctx.snapshot.conversationKey, {
    direction: p.direction,
    beforeSeq: cursorSeq("t", p.before_cursor),
    afterSeq: cursorSeq("t", p.after_cursor),
    limit: p.limit,
  });
  const items = rows.map((r) => toTranscriptItem(r, p.include_artifacts ?? false));
  return {
    items,
    next_cursor: hasMore ? items[items.length - 1]?.cursor : undefined,
    prev_cursor: items[0]?.cursor,
    has_more: hasMore,
  };
};

const eventGet: Handler<"event.get"> = async (ctx, p) => {
  const row = await eventLogStore(ctx.db).get(p.event_id);
  if (!row) throw new ApiError("not_found", `event ${p.event_id} not found`);
  if (row.conversationKey !== ctx.snapshot.conversationKey) throw denied("event of another conversation is not readable by this run", { event_id: p.event_id });
  return toEventRecord(row);
};

const eventPage: Handler<"event.page"> = async (ctx, p) => {
  ownConversation(ctx, p.conversation_id, "events");
  const { rows, hasMore } = await eventLogStore(ctx.db).page(ctx.snapshot.conversationKey, cursorSeq("e", p.before_cursor), p.limit);
  const items = rows.map(toEventRecord);
  return { items, next_cursor: hasMore ? items[items.length - 1]?.cursor : undefined, has_more: hasMore };
};

const stateGet: Handler<"state.get"> = async (ctx, p) => {
  const value = await stateStore(ctx.db).get(stateScopeKey(ctx, p.scope), p.key);
  return { value: value ?? null, found: value !== undefined };
};

const stateSet: Handler<"state.set"> = async (ctx, p) => {
  const scopeKey = stateScopeKey(ctx, p.scope);
  await stateStore(ctx.db).setStatement(scopeKey, p.key, ctx.snapshot.runnerId, p.scope, JSON.stringify(p.value)).run();
  return { ok: true };
};

const stateDelete: Handler<"state.delete"> = async (ctx, p) => {
  await stateStore(ctx.db).deleteStatement(stateScopeKey(ctx, p.scope), p.key).run();
  return { ok: true };
};

const stateList: Handler<"state.list"> = async (ctx, p) => {
  const scopeKey = stateScopeKey(ctx, p.scope);
  // The state.list cursor is the last key returned, made opaque.
  let afterKey: string | undefined;
  try {
    afterKey = p.cursor ? decodeKeyCursor(p.cursor) : undefined;
  } catch (cause) {
    throw new ApiError("invalid_argument", "cursor is not valid", { cause });
  }
  const { keys, hasMore } = await stateStore(ctx.db).list(scopeKey, { prefix: p.prefix ?? undefined, afterKey, limit: p.limit });
  return { keys, has_more: hasMore, next_cursor: hasMore ? encodeKeyCursor(keys[keys.length - 1]) : undefined };
};

const hostVersion: Handler<"host.version"> = async (ctx) => ({ version: ctx.config.HOST_VERSION });

/** The actions this host implements; the others answer not_found until they exist. */
export const ACTIONS: { [A in HostApiAction]?: Handler<A> } = {
  "history.page": historyPage,
  "event.get": eventGet,
  "event.page": eventPage,
  "state.get": stateGet,
  "state.set": stateSet,
  "state.delete": stateDelete,
  "state.list": stateList,
  "host.version": hostVersion,
};
