import { newId } from "../../lib/ids";
import type { ToolResource } from "../../protocol/resources";
import { callHttpTool } from "../../resources/http-tool";
import { formatSchemaIssues, validateJsonSchema } from "../../resources/json-schema";
import { redactValue, secretFragments, urlSecrets } from "../../resources/secrets";
import { storeToolResult } from "../../resources/tool-result-artifact";
import { toolsStore, type ToolRow } from "../../resources/tools-store";
import { parseJson } from "../../lib/json";
import { openValues } from "../../lib/secret-box";
import { answerHold, type AnswerHold } from "../answer-budget";
import { callSignal } from "../call-signal";
import { assertSameResource } from "../resource-identity";
import { ApiError, denied } from "../errors";
import { logUpstreamFailure, toApiError } from "../upstream-error";
import type { ActionContext, ActionTable, Handler } from "./context";
import { mcpServerSlot, toolSlot } from "../../stores/secret-slots";
import { jsonShapeProblem } from "../../protocol/common";
import { UpstreamError } from "../../resources/upstream";

/**
 * Levels of nesting a tool's answer may have (as deep as the host scrubs answers): a deeper one cannot be carried
 * (serialising it overflows the stack), so it is the tool's unusable answer, a 502, not the host's failure.
 */
const MAX_TOOL_RESULT_DEPTH = 256;

/** The tool as frozen in the run's snapshot: what the runner was shown is what is enforced. */
function grantedTool(ctx: ActionContext, name: string): ToolResource {
  const tool = ctx.snapshot.resources.tools.find((t) => t.tool_name === name);
  if (!tool) throw denied(`tool "${name}" is not granted to this run`, { tool_name: name });
  return tool;
}

const toolDetail: Handler<"tool.detail"> = async (ctx, p) => {
  const tool = grantedTool(ctx, p.tool_name);
  return { tool_name: tool.tool_name, description: tool.description, parameters: tool.parameters };
};

type Invoke = (signal: AbortSignal, toolCallId: string, hold: AnswerHold) => Promise<unknown>;

/** How to reach the tool, with its secrets, read at call time. */
async function invokerOf(ctx: ActionContext, row: ToolRow, parameters: Record<string, unknown>): Promise<{ invoke: Invoke; secrets: string[] }> {
  const maxBytes = ctx.config.RESOURCE_RESPONSE_MAX_BYTES;
  const timeoutMs = ctx.config.TOOL_CALL_TIMEOUT_MS;
  if (row.mcpServer) {
    const server = await toolsStore(ctx.db).getServer(row.mcpServer);
    if (!server || !row.mcpToolName) throw new ApiError("not_found", `the MCP server of tool ${row.toolName} is no longer registered`);
    assertSameResource(ctx, "tools", row.toolName, server.createdAt);
    const headers = await openValues(ctx.db.secrets, parseJson<Record<string, string>>(server.headersJson, {}), mcpServerSlot(server));
    return {
      secrets: secretFragments([...Object.values(headers), ...urlSecrets(server.url)]),
      invoke: (signal, _toolCallId, hold) => ctx.mcp.callTool({ url: server.url, headers, name: server.name }, { name: row.mcpToolName!, arguments: parameters }, { signal, timeoutMs, maxBytes, take: hold.take }),
    };
  }
  if (!row.endpoint) throw new ApiError("not_found", `tool ${row.toolName} has no endpoint`);
  assertSameResource(ctx, "tools", row.toolName, row.createdAt);
  const headers = await openValues(ctx.db.secrets, parseJson<Record<string, string>>(row.headersJson, {}), toolSlot(row));
  return {
    secrets: secretFragments([...Object.values(headers), ...urlSecrets(row.endpoint)]),
    invoke: (signal, toolCallId, hold) => callHttpTool({ endpoint: row.endpoint!, headers }, { runId: ctx.snapshot.runId, toolCallId, parameters }, { signal, maxBytes, take: hold.take }),
  };
}

/** Inline when small; otherwise an artifact the runner reads through the artifact API. */
async function deliverable(ctx: ActionContext, call: { toolName: string; toolCallId: string }, result: unknown) {
  const bytes = new TextEncoder().encode(JSON.stringify(result));
  if (bytes.length <= ctx.config.TOOL_RESULT_INLINE_MAX_BYTES) return { result };
  const s = ctx.snapshot;
  const ref = await storeToolResult({ db: ctx.db, artifacts: ctx.artifacts, config: ctx.config }, { conversationKey: s.conversationKey, conversationId: s.conversationId, runId: s.runId, runnerId: s.runnerId }, call, bytes);
  return { result_ref: ref };
}

/**
 * Parameters are checked against the tool's JSON Schema before anything is
 * sent; the call is bounded by TOOL_CALL_TIMEOUT_MS and the run's deadline,
 * and recorded as tool.call.started / tool.call.completed in the ledger.
 */
const toolCall: Handler<"tool.call"> = async (ctx, p) => {
  const tool = grantedTool(ctx, p.tool_name);
  const issues = validateJsonSchema(tool.parameters, p.parameters);
  if (issues.length) {
    throw new ApiError("invalid_argument", `parameters do not match the schema of tool ${p.tool_name}: ${formatSchemaIssues(issues)}`, { details: { tool_name: p.tool_name, issues } });
  }
  const row = await toolsStore(ctx.db).get(p.tool_name);
  if (!row) throw new ApiError("not_found", `tool ${p.tool_name} is no longer registered on this host`);
  const { invoke, secrets } = await invokerOf(ctx, row, p.parameters);

  const toolCallId = newId("tc");
  const ids = { tool_call_id: toolCallId, tool_name: p.tool_name };
  // Arguments are recorded as given, unless too large for a ledger row.
  const paramsBytes = new TextEncoder().encode(JSON.stringify(p.parameters)).length;
  const recorded = paramsBytes <= ctx.config.TOOL_RESULT_INLINE_MAX_BYTES ? { parameters: p.parameters } : { parameters_bytes: paramsBytes };
  await ctx.ledger.append([{ type: "tool.call.started", data: { ...ids, ...recorded } }]);
  const startedAt = Date.now();
  const call = callSignal(ctx, { ms: ctx.config.TOOL_CALL_TIMEOUT_MS, what: `tool ${p.tool_name}` });
  const hold = answerHold(ctx.config.RESOURCE_RESPONSE_BUDGET_BYTES);
  try {
    const raw = await invoke(call.signal, toolCallId, hold);
    const shape = jsonShapeProblem(raw, MAX_TOOL_RESULT_DEPTH, { depthOnly: true });
    if (shape) throw new UpstreamError("invalid_response", `the tool's answer is ${shape}`);
    // A tool that echoes its credentials must not hand them to the runner.
    const out = await deliverable(ctx, { toolName: p.tool_name, toolCallId }, redactValue(raw ?? null, secrets));
    await ctx.ledger.append([{ type: "tool.call.completed", data: { ...ids, ...out, duration_ms: Date.now() - startedAt } }]);
    return { ...ids, ...out };
  } catch (err) {
    // Its answer is dropped: not held while the failure is recorded, where it could get another call refused.
    hold.release();
    const failure = toApiError(err, secrets, ids, { runId: ctx.snapshot.runId, action: `tool ${p.tool_name}` });
    logUpstreamFailure(ctx, `tool ${p.tool_name}`, failure);
    await ctx.ledger.append([{ type: "tool.call.completed", data: { ...ids, error: { code: failure.code, message: failure.message }, duration_ms: Date.now() - startedAt } }]);
    throw failure;
  } finally {
    call.dispose();
    hold.release();
  }
};

export const toolActions: ActionTable = {
  "tool.detail": toolDetail,
  "tool.call": toolCall,
};
