import { parseKeepingIntegers } from "../lib/exact-json";
import { httpError, readText, upstreamFetch, type TakeBytes } from "./upstream";

export interface HttpToolTarget {
  endpoint: string;
  headers: Record<string, string>;
}

/**
 * An HTTP tool: `POST {endpoint}` with the validated arguments as the JSON
 * body, plus the operator's headers. A JSON answer is the result; any other
 * answer is returned as text.
 */
export async function callHttpTool(
  target: HttpToolTarget,
  call: { runId: string; toolCallId: string; parameters: Record<string, unknown> },
  opts: { signal: AbortSignal; maxBytes: number; take?: TakeBytes },
): Promise<unknown> {
  const headers = {
    ...target.headers,
    "content-type": "application/json",
    accept: "application/json",
    "x-agent-run-id": call.runId,
    "x-agent-tool-call-id": call.toolCallId,
  };
  const res = await upstreamFetch(target.endpoint, { method: "POST", headers, body: JSON.stringify(call.parameters), signal: opts.signal });
  if (!res.ok) throw await httpError(res, "the tool endpoint", opts.signal);
  const text = await readText(res, opts.maxBytes, opts.signal, opts.take);
  if (/\bjson\b/i.test(res.headers.get("content-type") ?? "")) {
    try {
      return parseKeepingIntegers(text);
    } catch {
      // Labelled JSON but is not: the text is still the tool's answer.
    }
  }
  return text;
}
