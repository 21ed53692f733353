import { encodeKeyCursor } from "../../lib/cursor";
import type { StateScope } from "../../protocol/context";
import { stateStore } from "../../stores/state";
import { STATE_CAP_SETTINGS, stateCap } from "../../stores/data-caps";
import { utf8ByteLength } from "../../protocol/common";
import { STATE_VALUE_MAX_BYTES } from "../../protocol/results";
import { unavailableStateScope } from "../../run/state-scope-refusal";
import { ApiError, denied } from "../errors";
import { givingBack, takeFromBudget } from "../run-write-budget";
import { writeWithinCap } from "../capped-write";
import { type ActionContext, type ActionTable, type Handler, afterKeyOf } from "./context";

function stateScopeKey(ctx: ActionContext, scope: StateScope): string {
  const key = ctx.snapshot.stateScopes[scope];
  if (!key) throw denied(unavailableStateScope(scope, ctx.snapshot.stateScopesUnidentified), { scope });
  return key;
}

const stateGet: Handler<"state.get"> = async (ctx, p) => {
  const value = await stateStore(ctx.db).get(stateScopeKey(ctx, p.scope), p.key);
  return { value: value ?? null, found: value !== undefined };
};

const stateSet: Handler<"state.set"> = async (ctx, p) => {
  const scopeKey = stateScopeKey(ctx, p.scope);
  const valueJson = JSON.stringify(p.value);
  const size = utf8ByteLength(valueJson);
  if (size > STATE_VALUE_MAX_BYTES) throw new ApiError("payload_too_large", `state value is ${size} bytes serialised; at most ${STATE_VALUE_MAX_BYTES} are allowed`);
  // One budget with the run's state.updated results: a runner cannot go round that cap through the Host API.
  const limit = ctx.config.RUN_MAX_STATE_UPDATES;
  takeFromBudget(ctx.stateWrites, limit, `this run has written state ${limit} times, the most a run may (RUN_MAX_STATE_UPDATES, state.updated results and state.set calls together)`);
  // A write refused for a full scope keeps its place in the budget (the database did a write's work), so a runner
  // looping on a full scope stops at RUN_MAX_STATE_UPDATES.
  const store = stateStore(ctx.db);
  const owner = { runnerId: ctx.snapshot.runnerId, agentId: ctx.snapshot.agentId, agentEpoch: ctx.snapshot.agentEpoch };
  const cap = stateCap(ctx.config);
  const statements = { write: store.setStatement(scopeKey, p.key, owner, p.scope, valueJson, cap), room: store.roomStatement(scopeKey, p.key) };
  await writeWithinCap(ctx.db, statements, size, cap, { what: `state scope ${p.scope}`, settings: STATE_CAP_SETTINGS, names: { scope: p.scope } }).catch(givingBack(ctx.stateWrites));
  return { ok: true };
};

const stateDelete: Handler<"state.delete"> = async (ctx, p) => {
  await stateStore(ctx.db).deleteStatement(stateScopeKey(ctx, p.scope), p.key).run();
  return { ok: true };
};

const stateList: Handler<"state.list"> = async (ctx, p) => {
  const scopeKey = stateScopeKey(ctx, p.scope);
  // The state.list cursor is the last key returned, made opaque.
  const { keys, hasMore } = await stateStore(ctx.db).list(scopeKey, { prefix: p.prefix ?? undefined, afterKey: afterKeyOf(p.cursor), limit: p.limit });
  return { keys, has_more: hasMore, next_cursor: hasMore ? encodeKeyCursor(keys[keys.length - 1]) : undefined };
};

export const stateActions: ActionTable = {
  "state.get": stateGet,
  "state.set": stateSet,
  "state.delete": stateDelete,
  "state.list": stateList,
};
