import { EventSourceParserStream } from "eventsource-parser/stream";
import { retryAfterMs } from "../lib/retry-after";
import { httpError, UpstreamError } from "./upstream";

/** The JSON-RPC request a POST body carries: its id, or undefined for a notification (or anything else). */
function requestOf(body: unknown): { id: unknown; method: string; params?: Record<string, unknown> } | undefined {
  if (typeof body !== "string") return undefined;
  try {
    const message = JSON.parse(body);
    return message && typeof message === "object" && !Array.isArray(message) && typeof message.method === "string" ? message : undefined;
  } catch {
    return undefined;
  }
}

/** Whether an event's data holds the answer (result or error) to request `id`. */
function answers(data: string, id: unknown): boolean {
  try {
    const parsed: unknown = JSON.parse(data);
    return (Array.isArray(parsed) ? parsed : [parsed]).some((m) => m && typeof m === "object" && (m as { id?: unknown }).id === id && ("result" in m || "error" in m));
  } catch {
    return false;
  }
}

/**
 * Reads an event stream answering request `id`: true once an event answers it, or once an event carries an id (the
 * server made the stream resumable, and the client resumes it); false if it ends or breaks before either.
 */
async function answeredOrResumable(stream: ReadableStream<Uint8Array>, id: unknown): Promise<boolean> {
  const reader = stream.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return false;
      if (value.id || answers(value.data, id)) return true;
    }
  } catch {
    return false;
  } finally {
    reader.cancel().catch(() => {});
  }
}

/**
 * A `fetch` for the MCP client that notices a request answered as an event stream whose stream ends or breaks
 * before the answer (the server went away mid-call): the client would wait for that answer until its timeout,
 * so `onUnanswered` is told at once (the session is then given up). A request the client cancelled meanwhile
 * expects no answer (MCP: a cancelled request is not answered), nor does a stream the server made resumable.
 */
export function watchAnswers(inner: typeof fetch, onUnanswered: (err: UpstreamError) => void): typeof fetch {
  const cancelled = new Set<unknown>();
  return async (input, init) => {
    const request = init?.method === "POST" ? requestOf(init.body) : undefined;
    if (request?.method === "notifications/cancelled") cancelled.add(request.params?.requestId);
    const res = await inner(input, init);
    if (!request || request.id === undefined || !res.body || !/text\/event-stream/i.test(res.headers.get("content-type") ?? "")) return res;
    const [watched, body] = res.body.tee();
    void answeredOrResumable(watched, request.id).then((ok) => {
      if (!ok && !cancelled.has(request.id)) onUnanswered(new UpstreamError("network", `the MCP server's answer to ${request.method} broke off before it answered`));
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/**
 * A `fetch` for the MCP client under which a POST the server refuses for now (429, 5xx) saying when to come back
 * (`Retry-After`) fails with that wait: the SDK's own error keeps the status but drops the headers, and with them when
 * a runner may call again.
 */
export function throttledAnswers(inner: typeof fetch): typeof fetch {
  return async (input, init) => {
    const res = await inner(input, init);
    if (init?.method !== "POST" || res.ok || (res.status !== 429 && res.status < 500) || retryAfterMs(res.headers) === undefined) return res;
    throw await httpError(res, "the MCP server", init.signal ?? new AbortController().signal);
  };
}
