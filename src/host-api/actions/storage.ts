import * as z from "zod";
import { encodeKeyCursor } from "../../lib/cursor";
import type { StorageArea } from "../../protocol/host-api";
import { storageStore, type StorageOwner } from "../../stores/storage";
import { ApiError, denied } from "../errors";
import { givingBack, takeFromBudget } from "../run-write-budget";
import { writeWithinCap } from "../capped-write";
import { STORAGE_CAP_SETTINGS, storageCap, storedBytesOf } from "../../stores/data-caps";
import { unavailableStorageArea } from "../gate-refusal";
import { type ActionContext, type ActionTable, type Handler, afterKeyOf } from "./context";

/**
 * PROTOCOL §9 storage: `plugin` belongs to the runner service, `workspace` to
 * the event's workspace; each only when the run's snapshot allows it.
 */
function ownerOf(ctx: ActionContext, area: StorageArea): StorageOwner {
  const s = ctx.snapshot;
  if (area === "plugin" && s.storage.plugin_storage) return { area, ownerKey: s.serviceId };
  if (area === "workspace" && s.storage.workspace_storage && s.workspaceId) return { area, ownerKey: s.workspaceId };
  // The refusal names its cause, so a runner author looks at the event rather than at a policy that does grant the area.
  throw denied(unavailableStorageArea(area, s), { area });
}

const Base64Schema = z.base64();

/** Decoded size of validated base64, without decoding it. */
function base64ByteLength(b64: string): number {
  const padding = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return Math.floor((b64.length * 3) / 4) - padding;
}

const storageGet: Handler<"storage.get"> = async (ctx, p) => {
  const value = await storageStore(ctx.db).get(ownerOf(ctx, p.area), p.key);
  return { value_base64: value ?? null, found: value !== undefined };
};

const storageSet: Handler<"storage.set"> = async (ctx, p) => {
  const owner = ownerOf(ctx, p.area);
  if (!Base64Schema.safeParse(p.value_base64).success) throw new ApiError("invalid_argument", "value_base64 is not base64");
  const size = base64ByteLength(p.value_base64);
  const max = ctx.config.STORAGE_MAX_VALUE_BYTES;
  if (size > max) throw new ApiError("payload_too_large", `storage value is ${size} bytes; at most ${max} are allowed`);
  const limit = ctx.config.RUN_MAX_STORAGE_WRITES;
  takeFromBudget(ctx.storageWrites, limit, `this run has written storage ${limit} times, the most a run may (RUN_MAX_STORAGE_WRITES)`);
  // As state.set: a write refused for a full area keeps its place in the run's budget.
  const store = storageStore(ctx.db);
  const cap = storageCap(ctx.config);
  const statements = { write: store.setStatement(owner, p.key, p.value_base64, cap), room: store.roomStatement(owner, p.key) };
  await writeWithinCap(ctx.db, statements, storedBytesOf(p.value_base64), cap, { what: `storage area ${p.area}`, settings: STORAGE_CAP_SETTINGS, names: { area: p.area } }).catch(givingBack(ctx.storageWrites));
  return { ok: true };
};

const storageDelete: Handler<"storage.delete"> = async (ctx, p) => {
  await storageStore(ctx.db).deleteStatement(ownerOf(ctx, p.area), p.key).run();
  return { ok: true };
};

const storageKeys: Handler<"storage.keys"> = async (ctx, p) => {
  const owner = ownerOf(ctx, p.area);
  const { keys, hasMore } = await storageStore(ctx.db).keys(owner, { prefix: p.prefix ?? undefined, afterKey: afterKeyOf(p.cursor), limit: p.limit });
  return { keys, has_more: hasMore, next_cursor: hasMore ? encodeKeyCursor(keys[keys.length - 1]) : undefined };
};

export const storageActions: ActionTable = {
  "storage.get": storageGet,
  "storage.set": storageSet,
  "storage.delete": storageDelete,
  "storage.keys": storageKeys,
};
