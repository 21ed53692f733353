import { EventSourceParserStream } from "eventsource-parser/stream";
import { retryAfterMs } from "../lib/retry-after";
import { httpError, UpstreamError, type TakeBytes } from "./upstream";

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
  } catch (err) {
    // The host would hold no more of it (its answer budget): that call ends with the refusal, the server broke nothing.
    return err instanceof AnswerRefused;
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** What an answer's body errors with when the host would hold no more of it (`cause`: the refusal the call ends with). */
export class AnswerRefused extends Error {
  override readonly name = "AnswerRefused";
  constructor(cause: unknown) {
    super("the host holds no more of this answer", { cause });
  }
}

/**
 * A `fetch` for the MCP client under which the answer to a request a call waits for (`takeFor` its id) is counted as it
 * is read, against what the host may hold at once, as an HTTP tool's is. Past that the body errors (AnswerRefused) and
 * the upstream's is cancelled; `take` itself ends the call with its refusal.
 */
export function heldAnswers(inner: typeof fetch, takeFor: (id: unknown) => TakeBytes | undefined): typeof fetch {
  return async (input, init) => {
    const request = init?.method === "POST" ? requestOf(init.body) : undefined;
    const res = await inner(input, init);
    if (request?.id === undefined || !res.body || !takeFor(request.id)) return res;
    const id = request.id;
    const counted = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          try {
            // Asked at each chunk: once the call is over, what is still read is no longer held for it.
            takeFor(id)?.(chunk.byteLength);
          } catch (err) {
            return controller.error(new AnswerRefused(err));
          }
          controller.enqueue(chunk);
        },
      }),
    );
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
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
