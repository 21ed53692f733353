import type { ModelMessage } from "../protocol/common";
import { contentPart, ModelInputError, type InlineArtifacts } from "./chat-content";

export { ModelInputError };

/** Keys of `extra` the host owns: the model and the messages are not the runner's to override. */
const RESERVED = new Set(["model", "messages", "tools", "stream"]);

/**
 * Keys with which a gateway picks models other than the one asked for (OpenRouter's `models` and `route`, LiteLLM's
 * `fallbacks`): through them a runner granted one model would call others on the operator's key. Refused, not dropped,
 * so the runner knows it got no fallback; the agent's `fallback_models` are the grant for that.
 */
const MODEL_ROUTING = new Set(["models", "route", "fallbacks"]);

export interface ChatRequest {
  messages: Record<string, unknown>[];
  tools?: Record<string, unknown>[];
  extra: Record<string, unknown>;
}

/** Provider fields (tool_calls, tool_call_id, name) pass through; only content is translated. */
function toProviderMessage(message: ModelMessage, inline: InlineArtifacts): Record<string, unknown> {
  const { content, ...rest } = message;
  return { ...rest, content: Array.isArray(content) ? content.map((el) => contentPart(el, inline)) : (content ?? null) };
}

/** Tools as OpenAI function definitions; a bare `{name, description, parameters}` is wrapped. */
function toProviderTool(tool: unknown): Record<string, unknown> {
  if (typeof tool !== "object" || tool === null || Array.isArray(tool)) throw new ModelInputError("each tool must be an object");
  const t = tool as Record<string, unknown>;
  if (t.type === "function") return t;
  if (typeof t.name !== "string") throw new ModelInputError("each tool needs a name (or the OpenAI {type: \"function\", function} form)");
  return { type: "function", function: { name: t.name, description: t.description, parameters: t.parameters ?? { type: "object", properties: {} } } };
}

export function toChatRequest(p: { messages: ModelMessage[]; tools?: unknown[] | null; extra?: Record<string, unknown> | null }, inline: InlineArtifacts = new Map()): ChatRequest {
  const routing = Object.keys(p.extra ?? {}).find((k) => MODEL_ROUTING.has(k));
  if (routing) throw new ModelInputError(`extra.${routing} would have the provider pick models this run was not granted; an agent's resource_policy.fallback_models are tried when a provider fails`);
  const extra = Object.fromEntries(Object.entries(p.extra ?? {}).filter(([k]) => !RESERVED.has(k)));
  return {
    messages: p.messages.map((m) => toProviderMessage(m, inline)),
    tools: p.tools?.length ? p.tools.map(toProviderTool) : undefined,
    extra,
  };
}
