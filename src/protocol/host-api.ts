/**
 * Host API requests (PROTOCOL.md §8): `POST {host}/v1/runs/{run_id}/api` with
 * `{action, params}`. Params are strict: a misspelt parameter is a clear 400,
 * not a silently ignored option on a call that may have side effects.
 */
import * as z from "zod";
import { ExactJsonValueSchema, formatZodIssues, labelSchema, MediaTypeSchema, ModelMessageSchema, orDefault, RecordSchema, refuseRoundedIntegers, storedKeyText } from "./common";
import { withDigitsAsSent } from "../lib/exact-json";
import type { AvailableApiName } from "./context";
import { StateScopeSchema } from "./context";
import type { PermissionGroup } from "./manifest";
import { StateKeySchema } from "./results";

/** Largest artifact.read window: responses stay bounded whatever the artifact size. */
export const ARTIFACT_READ_MAX_LENGTH = 1024 * 1024;

/** Strict, as its params are: a misspelt `params` member is a 400, not a call run with every default. */
export const HostApiRequestSchema = z.strictObject({
  action: z.string().min(1),
  params: orDefault(RecordSchema, {}),
});
export type HostApiRequest = z.infer<typeof HostApiRequestSchema>;

/**
 * Longest history.search query text, in characters: as long as any message text the host accepts (64 KiB), so a
 * runner may search with the message it was given. Only its first words are used (fts-query MAX_QUERY_TERMS).
 */
export const HISTORY_SEARCH_QUERY_MAX_LENGTH = 64 * 1024;

const id = z.string().min(1);
const cursor = z.string().min(1).nullish();
/**
 * A whole number of any size: a runner asking for "everything" with its language's largest integer
 * (Python's sys.maxsize, Go's math.MaxInt64) is over 2^53, which `z.int()` refuses; capped, it means the cap.
 */
const wholeNumber = z.number().refine(Number.isInteger, { message: "expected a whole number" });
/**
 * A count or size the host caps: above `max` it is `max`, as LangBot's host caps it (a runner written for that host
 * asks for what it wants and reads `has_more`), while anything under 1 is a 400.
 */
const capped = (max: number) => wholeNumber.min(1).transform((n) => Math.min(n, max));
const pageLimit = (fallback: number) => orDefault(capped(100), fallback);

export const StorageAreaSchema = z.enum(["plugin", "workspace"]);
export type StorageArea = z.infer<typeof StorageAreaSchema>;
const storageKey = storedKeyText(256);

const stateRef = { scope: StateScopeSchema, key: StateKeySchema };

/**
 * An object the host passes on to an upstream as sent (tool arguments, retrieval filters, provider fields): one whose
 * whole number JSON parsing rounded (a 64-bit id) is refused, as in every value kept as sent, not passed on altered.
 */
const ExactRecordSchema = RecordSchema.superRefine(refuseRoundedIntegers);

const modelInvokeParams = z.strictObject({
  model_id: id,
  messages: z.array(ModelMessageSchema).min(1),
  // Function definitions go to the provider as sent: a 64-bit id in a schema (`const`, `enum`) is refused, not rounded.
  tools: z.array(z.unknown()).superRefine(refuseRoundedIntegers).nullish(),
  extra: ExactRecordSchema.nullish(),
});

export const HOST_API_PARAMS = {
  "history.page": z.strictObject({
    conversation_id: id.nullish(),
    before_cursor: cursor,
    after_cursor: cursor,
    limit: pageLimit(20),
    direction: orDefault(z.enum(["backward", "forward"]), "backward"),
    include_artifacts: z.boolean().nullish(),
  }),
  "history.search": z.strictObject({
    // Plain text, every word matched literally (no query syntax); see stores/fts-query.ts.
    query: z.string().min(1).max(HISTORY_SEARCH_QUERY_MAX_LENGTH),
    filters: z
      .strictObject({
        conversation_id: id.nullish(),
        // An empty list means no filter.
        event_types: z.array(z.string().min(1)).max(50).nullish(),
        roles: z.array(z.string().min(1)).max(50).nullish(),
      })
      .nullish(),
    top_k: orDefault(capped(50), 10),
  }),
  "event.get": z.strictObject({ event_id: id }),
  "event.page": z.strictObject({
    before_cursor: cursor,
    after_cursor: cursor,
    limit: pageLimit(20),
    conversation_id: id.nullish(),
  }),
  "steering.pull": z.strictObject({
    mode: orDefault(z.enum(["all", "one-at-a-time"]), "all"),
    limit: capped(100).nullish(),
  }),
  "artifact.metadata": z.strictObject({ artifact_id: id }),
  "artifact.read": z.strictObject({
    artifact_id: id,
    offset: orDefault(z.int().nonnegative(), 0),
    length: orDefault(capped(ARTIFACT_READ_MAX_LENGTH), ARTIFACT_READ_MAX_LENGTH),
  }),
  "state.get": z.strictObject(stateRef),
  // The value's size is checked by the action, after the scope: §8 checks scope before payload size.
  "state.set": z.strictObject({ ...stateRef, value: ExactJsonValueSchema }),
  "state.delete": z.strictObject(stateRef),
  "state.list": z.strictObject({
    scope: StateScopeSchema,
    prefix: z.string().nullish(),
    limit: pageLimit(100),
    cursor,
  }),
  "storage.get": z.strictObject({ area: StorageAreaSchema, key: storageKey }),
  // Checked by the action after the area (§8: scope before payload): base64, then size.
  "storage.set": z.strictObject({ area: StorageAreaSchema, key: storageKey, value_base64: z.string() }),
  "storage.delete": z.strictObject({ area: StorageAreaSchema, key: storageKey }),
  "storage.keys": z.strictObject({
    area: StorageAreaSchema,
    prefix: z.string().nullish(),
    limit: orDefault(capped(1000), 100),
    cursor,
  }),
  "model.invoke": modelInvokeParams,
  "model.stream": modelInvokeParams,
  "model.rerank": z.strictObject({
    model_id: id,
    query: z.string().min(1),
    documents: z.array(z.string()).min(1),
    // Any size (sys.maxsize means "all"): the provider is asked for at most the documents given.
    top_k: wholeNumber.min(1).nullish(),
  }),
  "tool.detail": z.strictObject({ tool_name: id }),
  "tool.call": z.strictObject({ tool_name: id, parameters: orDefault(ExactRecordSchema, {}) }),
  "knowledge.retrieve": z.strictObject({
    kb_id: id,
    query: z.string().min(1),
    // §8 sets no cap; this one only keeps an answer bounded.
    top_k: orDefault(capped(100), 5),
    filters: ExactRecordSchema.nullish(),
  }),
  "host.version": z.strictObject({}),
} as const;

export type HostApiAction = keyof typeof HOST_API_PARAMS;
export const HOST_API_ACTIONS = Object.keys(HOST_API_PARAMS) as HostApiAction[];
/** Validated params of one action, defaults applied. */
export type HostApiParams<A extends HostApiAction> = z.output<(typeof HOST_API_PARAMS)[A]>;

export function isHostApiAction(action: string): action is HostApiAction {
  return Object.hasOwn(HOST_API_PARAMS, action);
}

/** A query option sent with no value (`?name=`, what httpx sends for None) is left unset, as a null param is. */
const unsetIfEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === "" ? undefined : v), schema.optional());

/**
 * `artifact.upload` is `PUT {host}/v1/runs/{run_id}/artifacts?name=&mime_type=&artifact_type=` with raw bytes. Strict,
 * as every action's params: a misspelt option (`mimetype=`) is a 400, not an artifact stored without it.
 */
export const ArtifactUploadQuerySchema = z.strictObject({
  name: unsetIfEmpty(labelSchema(255)),
  mime_type: unsetIfEmpty(MediaTypeSchema),
  /** Absent: derived from mime_type (image, audio, video, else file). */
  artifact_type: unsetIfEmpty(labelSchema(64)),
});
export type ArtifactUploadQuery = z.infer<typeof ArtifactUploadQuerySchema>;

/**
 * What gates each action: an `available_apis` flag, "resources" (the resource
 * and operation must be in `ctx.resources`, see RESOURCE_OPERATION_OF_ACTION),
 * or null for actions every run may call.
 */
export type ApiGate = AvailableApiName | "resources" | null;

export const API_GROUP_OF_ACTION = {
  "history.page": "history_page",
  "history.search": "history_search",
  "event.get": "event_get",
  "event.page": "event_page",
  "steering.pull": "steering_pull",
  "artifact.metadata": "artifact_metadata",
  "artifact.read": "artifact_read",
  "artifact.upload": "artifact_read",
  "state.get": "state",
  "state.set": "state",
  "state.delete": "state",
  "state.list": "state",
  "storage.get": "storage",
  "storage.set": "storage",
  "storage.delete": "storage",
  "storage.keys": "storage",
  "model.invoke": "resources",
  "model.stream": "resources",
  "model.rerank": "resources",
  "tool.detail": "resources",
  "tool.call": "resources",
  "knowledge.retrieve": "resources",
  "host.version": null,
} as const satisfies Record<HostApiAction | "artifact.upload", ApiGate>;

/** For resource-gated actions: the resource list and the operation the listed resource must carry. */
export const RESOURCE_OPERATION_OF_ACTION = {
  "model.invoke": { group: "models", operation: "invoke" },
  "model.stream": { group: "models", operation: "stream" },
  "model.rerank": { group: "models", operation: "rerank" },
  "tool.detail": { group: "tools", operation: "detail" },
  "tool.call": { group: "tools", operation: "call" },
  "knowledge.retrieve": { group: "knowledge_bases", operation: "retrieve" },
} as const satisfies Partial<Record<HostApiAction, { group: PermissionGroup; operation: string }>>;

/** Narrow on `action` to get that action's params type. */
export type KnownHostApiCall = {
  [A in HostApiAction]: { ok: true; action: A; params: HostApiParams<A> };
}[HostApiAction];

export type ParsedHostApiParams =
  | KnownHostApiCall
  | { ok: false; code: "not_found" | "invalid_argument"; message: string };

/** Validate one call's params; an unknown action is `not_found`, bad params `invalid_argument`. */
export function parseHostApiParams(action: string, params: unknown, text?: string): ParsedHostApiParams {
  if (!isHostApiAction(action)) {
    return { ok: false, code: "not_found", message: `unknown action "${action}"` };
  }
  const parsed = HOST_API_PARAMS[action].safeParse(params ?? {});
  if (!parsed.success) {
    // `text` is the call's body: a refused number is named as the runner wrote it, under `params`.
    const issues = text === undefined ? parsed.error.issues : withDigitsAsSent(parsed.error.issues, text, ["params"]);
    return { ok: false, code: "invalid_argument", message: formatZodIssues({ issues }) };
  }
  // The schema was looked up by `action`, so the pair is consistent; TS cannot correlate the two.
  return { ok: true, action, params: parsed.data } as KnownHostApiCall;
}
