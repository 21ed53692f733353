import { hostRecordInsert } from "../stores/event-log";
import { API_GROUP_OF_ACTION, HostApiRequestSchema, parseHostApiParams, type HostApiAction } from "../protocol/host-api";
import { formatZodIssues } from "../protocol/common";
import { ACTIONS, type ActionContext } from "./actions/index";
import { ApiError, denied } from "./errors";

/** Serialised here so the reply crosses the Durable Object RPC boundary as plain text. */
export interface HostApiReply {
  status: number;
  json: string;
}

const reply = (status: number, body: unknown): HostApiReply => ({ status, json: JSON.stringify(body) });

/**
 * One Host API call of an authenticated run (the token was already checked by
 * the owning Durable Object). Checks in §8 order against the frozen snapshot:
 * API granted, params, scope (inside the action), deadline. Every denial is
 * appended to EventLog.
 */
export async function handleHostApiCall(ctx: ActionContext, body: unknown): Promise<HostApiReply> {
  let action = "";
  try {
    const envelope = HostApiRequestSchema.safeParse(body);
    if (!envelope.success) throw new ApiError("invalid_argument", `invalid Host API request: ${formatZodIssues(envelope.error)}`);
    action = envelope.data.action;
    if (!Object.hasOwn(API_GROUP_OF_ACTION, action)) throw new ApiError("not_found", `unknown action "${action}"`);
    const gate = API_GROUP_OF_ACTION[action as HostApiAction];
    if (gate === "resources") throw denied(`no ${action.split(".")[0]} resources are granted to this run`, { action, ...resourceNamed(envelope.data.params) });
    if (gate && !ctx.snapshot.availableApis[gate]) throw denied(`${action} is not in this run's available_apis`, { action, api: gate });
    const parsed = parseHostApiParams(action, envelope.data.params);
    if (!parsed.ok) throw new ApiError(parsed.code, parsed.message);
    if (Date.now() > ctx.snapshot.deadlineAt) throw new ApiError("deadline_exceeded", "the run's deadline has passed");
    const handler = ACTIONS[parsed.action] as ((c: ActionContext, p: unknown) => Promise<unknown>) | undefined;
    if (!handler) throw new ApiError("not_found", `${action} is not available on this host`);
    return reply(200, { ok: true, data: await handler(ctx, parsed.params) });
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    if (err.code === "unauthorized") await auditDenial(ctx, action, err);
    return reply(err.status, err.toBody());
  }
}

/** The resource a refused resource call named, for the audit record (raw params: they are not validated yet). */
function resourceNamed(params: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of ["model_id", "tool_name", "kb_id"]) {
    const value = params[key];
    if (typeof value === "string") out[key] = value.slice(0, 200);
  }
  return out;
}

async function auditDenial(ctx: ActionContext, action: string, err: ApiError) {
  const s = ctx.snapshot;
  await hostRecordInsert(ctx.db, {
    eventType: "host_api.denied",
    conversationKey: s.conversationKey,
    conversationId: s.conversationId,
    threadId: s.threadId,
    runId: s.runId,
    data: { run_id: s.runId, runner_id: s.runnerId, action, resource: err.details ?? {}, scope: { conversation_id: s.conversationId, thread_id: s.threadId }, reason: err.message },
  }).run();
}
