/**
 * Outbound calls to operator-configured endpoints (model providers, tools,
 * retrieval). Every failure becomes an UpstreamError whose message is safe to
 * show once scrubbed of the resource's secrets (see secrets.ts).
 */

import { parseKeepingIntegers } from "../lib/exact-json";
import { fetchFailureReason, namingOpaqueFailure } from "../lib/opaque-fetch-failure";
import { retryAfterMs } from "../lib/retry-after";
import { headOf } from "../lib/text";
import { isTransientStatus } from "../lib/http-status";

export type UpstreamFailure = "network" | "http" | "invalid_response" | "too_large" | "timeout";

export class UpstreamError extends Error {
  override readonly name = "UpstreamError";
  constructor(
    readonly kind: UpstreamFailure,
    message: string,
    readonly status?: number,
    options?: { cause?: unknown; retryAfterMs?: number; cutShort?: boolean },
  ) {
    super(message, options);
    this.retryAfterMs = options?.retryAfterMs;
    this.cutShort = options?.cutShort === true;
  }

  /** How long the upstream asked to be left alone (its Retry-After), if it said. */
  readonly retryAfterMs?: number;

  /**
   * The message ends with the upstream's words cut short (upstreamWords), before anyone knew the secrets: one may run
   * past its end, only its start there, so it is scrubbed as a text cut at its tail (shownUpstreamMessage), never whole.
   */
  readonly cutShort: boolean;

  /** The provider's side failed (down, overloaded, throttling, garbage): another provider may do better. */
  get providerFault(): boolean {
    if (this.kind === "network" || this.kind === "invalid_response" || this.kind === "timeout") return true;
    return this.kind === "http" && isTransientStatus(this.status ?? 0);
  }
}

/** An aborted call rethrows its signal's reason when the host set one (deadline, timeout, run ended). */
export function abortReason(signal: AbortSignal, fallback: unknown): unknown {
  return signal.aborted && signal.reason instanceof Error && signal.reason.name !== "AbortError" ? signal.reason : fallback;
}

export async function upstreamFetch(url: string, init: RequestInit & { signal: AbortSignal }): Promise<Response> {
  try {
    // Credentials go only where the operator pointed them: an upstream's redirect is its answer, never followed.
    return await fetch(url, { ...init, redirect: "manual" });
  } catch (err) {
    // Still a `network` failure, a provider fault, when it is workerd's opaque one: a fallback provider is tried.
    throw abortReason(init.signal, new UpstreamError("network", `request to ${new URL(url).origin} failed: ${fetchFailureReason(err)}`, undefined, { cause: err }));
  }
}

export interface AttemptSignal {
  /** For the request: aborted by the parent signal, or by the attempt's own timer. */
  signal: AbortSignal;
  /** The upstream has answered (a stream began): its timer stops, while the parent still aborts the call. */
  answered(): void;
  /** The attempt is over (failed): stop the timer and stop following the parent. */
  dispose(): void;
}

/**
 * One attempt at an upstream that must answer (its whole body, or a stream's
 * first event) within `ms`; otherwise it is aborted with a `timeout`
 * UpstreamError, a provider fault, so a fallback can be tried.
 */
export function attemptSignal(parent: AbortSignal, ms: number, what: string): AttemptSignal {
  const controller = new AbortController();
  const follow = () => controller.abort(parent.reason);
  if (parent.aborted) follow();
  else parent.addEventListener("abort", follow, { once: true });
  const timer = setTimeout(() => controller.abort(new UpstreamError("timeout", `${what} did not answer within ${ms} ms`)), ms);
  return {
    signal: controller.signal,
    answered: () => clearTimeout(timer),
    dispose() {
      clearTimeout(timer);
      parent.removeEventListener("abort", follow);
    },
  };
}

/** The decoder for the charset a Content-Type names (UTF-8 when it names none, or one this runtime lacks). */
export function decoderFor(contentType: string | null): TextDecoder {
  const label = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? "")?.[1];
  try {
    return new TextDecoder(label ?? "utf-8");
  } catch {
    return new TextDecoder();
  }
}

/** Counts bytes of an answer as they are read, against what the host may hold at once; throws to refuse more. */
export type TakeBytes = (bytes: number) => void;

/** The body's next chunk; one that breaks off is the upstream's fault (or, aborted, the abort's reason: deadline, timeout). */
async function readChunk(reader: ReadableStreamDefaultReader<Uint8Array>, signal: AbortSignal): Promise<ReadableStreamReadResult<Uint8Array>> {
  try {
    return await reader.read();
  } catch (err) {
    throw abortReason(signal, new UpstreamError("network", `response broke off: ${fetchFailureReason(err)}`, undefined, { cause: err }));
  }
}

/**
 * Read a body up to `maxBytes`, refusing (not truncating) a larger one, each chunk counted by `take` as it
 * arrives. `signal` bounds the whole read: the request's signal, whose abort also errors the body.
 */
export async function readText(res: Response, maxBytes: number, signal: AbortSignal, take?: TakeBytes): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const decoder = decoderFor(res.headers.get("content-type"));
  let total = 0;
  let text = "";
  try {
    for (;;) {
      const { done, value } = await readChunk(reader, signal);
      if (done) break;
      total += value.length;
      if (total > maxBytes) throw new UpstreamError("too_large", `response is larger than ${maxBytes} bytes`);
      take?.(value.length);
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return text + decoder.decode();
}

/**
 * How much of an upstream's own words an error keeps. Generous: the message is cut to size again once its secrets are
 * scrubbed (toApiError); this first cut is made before they are known, so the error says it was made (`cutShort`).
 */
const UPSTREAM_MESSAGE_MAX_CHARS = 16 * 1024;

/** An upstream's words as an error's message ends with them: their first `max` characters, and whether more were left out. */
export function upstreamWords(text: string, max = UPSTREAM_MESSAGE_MAX_CHARS): { text: string; cutShort: boolean } {
  const head = headOf(text, max);
  return { text: head, cutShort: head.length < text.length };
}

/** A non-2xx answer as an error, with the start of its body (the caller scrubs secrets); rejects with the abort's reason when `signal` ends the read. */
export async function httpError(res: Response, what: string, signal: AbortSignal): Promise<UpstreamError> {
  const body = await readText(res, 64 * 1024, signal).catch((err: unknown) => {
    // Cut off by the call's own end (its timeout, the deadline, the run stopped): that is why the call ended, not a
    // refusal the host never read to its end (which would be retried, or fallen back from, as if it had answered).
    if (signal.aborted) throw abortReason(signal, err);
    return "";
  });
  // The body's words last in the message: a secret the cut runs through is left out where the message is shown.
  const snippet = upstreamWords(body.trim());
  const message = `${what} answered HTTP ${res.status}${snippet.text ? `: ${snippet.text}` : ""}`;
  return new UpstreamError("http", message, res.status, { retryAfterMs: retryAfterMs(res.headers), cutShort: snippet.cutShort });
}

export async function readJson(res: Response, maxBytes: number, signal: AbortSignal, what: string, take?: TakeBytes): Promise<unknown> {
  const text = await readText(res, maxBytes, signal, take);
  try {
    return parseKeepingIntegers(text);
  } catch (cause) {
    throw new UpstreamError("invalid_response", `${what} did not answer JSON`, res.status, { cause });
  }
}

/**
 * A `fetch` whose answers' bodies are capped at `maxBytes` (for clients that
 * read bodies themselves, like the MCP SDK's transport): a body over the cap
 * errors with a `too_large` UpstreamError, which is also reported to
 * `onTooLarge` so the caller can stop waiting for an answer that will not come.
 */
export function cappedFetch(maxBytes: number, onTooLarge: (err: UpstreamError) => void, opts: { perSseEvent?: boolean } = {}): typeof fetch {
  const tooLarge = () => {
    const err = new UpstreamError("too_large", `response is larger than ${maxBytes} bytes`);
    onTooLarge(err);
    return err;
  };
  return async (input, init) => {
    // The MCP SDK passes a failed fetch's error on as it is: workerd's opaque one is given its known causes first.
    const res = await fetch(input, init).catch((err: unknown) => {
      throw namingOpaqueFailure(err);
    });
    // Redirects are returned as they are (their url and type matter to the caller); they have no body worth reading.
    if (!res.body || (res.status >= 300 && res.status < 400)) return res;
    const declared = Number(res.headers.get("content-length"));
    if (Number.isFinite(declared) && declared > maxBytes) {
      await res.body.cancel().catch(() => {});
      throw tooLarge();
    }
    // An event stream may be capped per event (bytes since the last blank line) rather than as a whole.
    const perEvent = opts.perSseEvent === true && /text\/event-stream/i.test(res.headers.get("content-type") ?? "");
    let total = 0;
    let previous = -1;
    const counted = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          if (!perEvent) total += chunk.byteLength;
          else {
            for (const byte of chunk) {
              if (byte === 13) continue;
              total = byte === 10 && previous === 10 ? 0 : total + 1;
              previous = byte;
            }
          }
          if (total > maxBytes) controller.error(tooLarge());
          else controller.enqueue(chunk);
        },
      }),
    );
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
