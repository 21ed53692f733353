import { hostRecordInsert } from "../stores/event-log";
import { readsOwnToolResult } from "./actions/artifacts";
import { API_GROUP_OF_ACTION, HostApiRequestSchema, parseHostApiParams } from "../protocol/host-api";
import { formatZodIssues, jsonShapeProblem, MAX_JSON_DEPTH } from "../protocol/common";
import { ACTIONS, type ActionContext } from "./actions/index";
import type { ApiErrorCode } from "../protocol/errors";
import { SealedSecretError } from "../lib/secret-box";
import type { AuthorizationSnapshot } from "../run/snapshot";
import { ApiError, denied, hostFault, invalidToken } from "./errors";
import { decisionScope, logDecision, logRefusal, MAX_PARAM_CHARS, resourceOf } from "./decision-log";
import { checkResourceGrant, isResourceAction } from "./resource-gate";
import { gateRefusal } from "./gate-refusal";
import { StreamReply } from "./stream-reply";
import { unopenedCredential } from "./upstream-error";
import { loggedError } from "../lib/describe-error";
import { loggedText } from "../lib/log-text";
import { roundedIntegerAt, roundedIntegerMessage } from "../lib/exact-json";

/** Serialised here so the reply crosses the Durable Object RPC boundary as plain text (or a byte stream). */
export interface HostApiReply {
  status: number;
  json: string;
  /** Set for streaming actions (`model.stream`): the body to pass through, and its content type. */
  stream?: ReadableStream<Uint8Array>;
  contentType?: string;
  /** The stream's id in the run's OpenStreams: the Worker closes it by this id if the runner goes away. */
  streamId?: string;
}

/** The HTTP answer the Worker sends for a reply. */
export function hostApiResponse(reply: HostApiReply): Response {
  if (reply.stream) {
    return new Response(reply.stream, { status: reply.status, headers: { "content-type": reply.contentType ?? "application/x-ndjson", "cache-control": "no-cache" } });
  }
  return new Response(reply.json, { status: reply.status, headers: { "content-type": "application/json" } });
}

/**
 * A Host API request body as the Worker read it: its text, or the refusal it
 * earned (too large), as plain data to cross the RPC boundary. What is wrong
 * with it is answered only once the token has been accepted: §8 checks the
 * run and its token before the payload.
 */
export type HostApiBody = { text: string } | { refused: { code: ApiErrorCode; message: string } };

type BodyRefusal = { code: ApiErrorCode; message: string };
/** Levels a request adds above a value: the body, params, and the value's own container. */
const ENVELOPE_DEPTH = 4;

/** The body's JSON, or why it cannot be read as a request: not JSON, nested deeper than any request is, or with a "__proto__" member. */
export function parseHostApiBody(body: HostApiBody): { json: unknown; text: string } | { refused: BodyRefusal } {
  if ("refused" in body) return body;
  let json: unknown;
  try {
    json = JSON.parse(body.text);
  } catch {
    return { refused: { code: "invalid_argument", message: "request body is not valid JSON" } };
  }
  // Headroom for the envelope around params: a value as deep as JsonValueSchema allows still gets to its own check.
  const problem = jsonShapeProblem(json, MAX_JSON_DEPTH + ENVELOPE_DEPTH);
  if (problem) return { refused: { code: "invalid_argument", message: `request body: ${problem}` } };
  return { json, text: body.text };
}

const reply = (status: number, body: unknown): HostApiReply => ({ status, json: JSON.stringify(body) });
export const errorReply = (err: ApiError): HostApiReply => reply(err.status, err.toBody());

/** 401 for a token that opens no active run; logged, with the run's runner when the run is live here. */
export function refuseToken(runId: string, session: { snapshot: AuthorizationSnapshot } | undefined, action: string | null = null): HostApiReply {
  const err = invalidToken();
  logRefusal(runId, session?.snapshot ?? null, err.code, err.status, action);
  return errorReply(err);
}

/** 408 for a call with the token of a run stopped by its deadline and still ending (PROTOCOL §8: the deadline check), logged. */
export function refusePastDeadline(snapshot: AuthorizationSnapshot, action: string | null = null): HostApiReply {
  const err = new ApiError("deadline_exceeded", "the run's deadline has passed");
  logRefusal(snapshot.runId, snapshot, err.code, err.status, action);
  return errorReply(err);
}

/** A body the Worker refused (too large, not JSON), answered now that the token was accepted. */
export function refuseBody(snapshot: AuthorizationSnapshot, refused: BodyRefusal): HostApiReply {
  const err = new ApiError(refused.code, refused.message);
  logRefusal(snapshot.runId, snapshot, err.code, err.status);
  return errorReply(err);
}

/** 429 for a call past the run's MAX_API_CALLS_IN_FLIGHT: refused before it is looked at, so it holds nothing. */
export function refuseCallsInFlight(snapshot: AuthorizationSnapshot, limit: number): HostApiReply {
  const err = new ApiError("rate_limited", `this run already has ${limit} Host API calls in flight; try again once one is answered`, { retryable: true, details: { limit } });
  logRefusal(snapshot.runId, snapshot, err.code, err.status);
  return errorReply(err);
}

/**
 * One Host API call of an authenticated run (the token was already checked by
 * the owning Durable Object). Checks in §8 order against the frozen snapshot:
 * API granted, params, scope (inside the action), deadline. Every decision
 * is logged; every denial is also appended to EventLog.
 */
export async function handleHostApiCall(ctx: ActionContext, { json: body, text }: { json: unknown; text?: string }): Promise<HostApiReply> {
  let action: string | null = null;
  let params: unknown;
  const answered = (reply: HostApiReply, outcome: string, resource: Record<string, unknown> = resourceOf(params)) => {
    const s = ctx.snapshot;
    // The action is the runner's string until it is known: cut like any other field.
    logDecision({ run_id: s.runId, runner_id: s.runnerId, action: action?.slice(0, 200) ?? null, resource, scope: decisionScope(s), outcome, status: reply.status });
    return reply;
  };
  try {
    const envelope = HostApiRequestSchema.safeParse(body);
    if (!envelope.success) throw new ApiError("invalid_argument", `invalid Host API request: ${formatZodIssues(envelope.error)}`);
    action = envelope.data.action;
    params = envelope.data.params;
    if (!Object.hasOwn(API_GROUP_OF_ACTION, action)) throw new ApiError("not_found", `unknown action "${action}"`);
    if (!(await readsOwnToolResult(ctx, action, envelope.data.params))) checkGranted(ctx, action as GatedAction, envelope.data.params);
    // §8 lists it among the actions, so a runner author tries it here: "unknown action" would send them looking elsewhere.
    if (action === "artifact.upload") throw new ApiError("not_found", `artifact.upload is not an action of this route: PUT /v1/runs/${ctx.snapshot.runId}/artifacts?name=&mime_type=&artifact_type= with the raw bytes as its body and the same bearer token`);
    const parsed = parseHostApiParams(action, envelope.data.params, text);
    if (!parsed.ok) throw new ApiError(parsed.code, parsed.message);
    // A whole number past what the value check can see (beyond 64 bits, read as a float): refused as the others are, not kept or passed on rounded.
    for (const exactAt of text === undefined ? [] : (EXACT_PARAMS[parsed.action] ?? [])) {
      const rounded = roundedIntegerAt(text!, ["params", exactAt]);
      if (rounded) throw new ApiError("invalid_argument", `${exactAt}: ${roundedIntegerMessage(rounded)}`);
    }
    checkDeadline(ctx);
    const handler = ACTIONS[parsed.action] as ((c: ActionContext, p: unknown) => Promise<unknown>) | undefined;
    if (!handler) throw new ApiError("not_found", `${action} is not available on this host`);
    const data = await handler(ctx, parsed.params);
    if (data instanceof StreamReply) {
      const streamId = data.lifecycle ? ctx.streams.open(data.lifecycle) : undefined;
      return answered({ status: 200, json: "", stream: data.body, contentType: data.contentType, streamId }, "allowed");
    }
    return answered(reply(200, { ok: true, data }), "allowed");
  } catch (thrown) {
    const err = thrown instanceof SealedSecretError ? unopenedCredential(thrown) : thrown instanceof ApiError ? thrown : hostFault(ctx.snapshot.runId, action, thrown);
    if (err.code === "unauthorized") await auditDenial(ctx, action ?? "", err);
    return answered(errorReply(err), err.code, { ...resourceOf(params), ...resourceOf(err.details) });
  }
}

type GatedAction = keyof typeof API_GROUP_OF_ACTION;

/** The params of each action whose value the host keeps (state) or passes on to an upstream as sent. */
const EXACT_PARAMS: Partial<Record<string, readonly string[]>> = {
  "state.set": ["value"],
  "tool.call": ["parameters"],
  "knowledge.retrieve": ["filters"],
  "model.invoke": ["extra", "tools"],
  "model.stream": ["extra", "tools"],
};

/** The action's API must be in the snapshot's available_apis, or its resource and operation in the snapshot's grants. */
export function checkGranted(ctx: Pick<ActionContext, "snapshot">, action: GatedAction, params: Record<string, unknown> = {}) {
  const gate = API_GROUP_OF_ACTION[action];
  if (gate === "resources") {
    if (isResourceAction(action)) checkResourceGrant(ctx.snapshot, action, params);
    return;
  }
  if (gate && !ctx.snapshot.availableApis[gate]) throw denied(gateRefusal(ctx.snapshot, action, gate, params), { action, api: gate });
}

export function checkDeadline(ctx: Pick<ActionContext, "snapshot">) {
  if (Date.now() > ctx.snapshot.deadlineAt) throw new ApiError("deadline_exceeded", "the run's deadline has passed");
}

/** A denial's record stays small whatever was asked (an id of a MiB): each field cut as the decision log cuts it. */
const cutStrings = (details: Record<string, unknown> | undefined) =>
  Object.fromEntries(Object.entries(details ?? {}).map(([name, value]) => [name, typeof value === "string" ? value.slice(0, MAX_PARAM_CHARS) : value]));
const MAX_REASON_CHARS = 1000;

/**
 * Denials are facts: appended to EventLog with run, runner, action, resource and scope, and to the run's ledger (one
 * round trip), where whoever reads why the run went as it did looks first. A record the database refuses is said on
 * the log: the denial is answered all the same. Only a run's first MAX_RECORDED_DENIALS are (denial-cap.ts).
 */
export async function auditDenial(ctx: Pick<ActionContext, "db" | "snapshot" | "ledger" | "denials">, action: string, err: ApiError): Promise<void> {
  if (!ctx.denials.admit()) return;
  const s = ctx.snapshot;
  // Small whatever was asked: identifying fields cut as the decision log cuts them, the host's own reason; never a value.
  const data = { run_id: s.runId, runner_id: s.runnerId, action, resource: cutStrings(err.details), scope: { conversation_id: s.conversationId, thread_id: s.threadId }, reason: err.message.slice(0, MAX_REASON_CHARS) };
  const record = hostRecordInsert(ctx.db, {
    eventType: "host_api.denied",
    conversationKey: s.conversationKey,
    conversationId: s.conversationId,
    threadId: s.threadId,
    workspaceId: s.workspaceId,
    botId: s.botId,
    runId: s.runId,
    data,
  });
  await ctx.ledger
    .append([{ type: "host_api.denied", data }], [record])
    .catch((e: Error) => console.error(`run ${s.runId}: denial of ${loggedText(action, 200)} not recorded: ${loggedError(e)}`));
}
