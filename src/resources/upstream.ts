/**
 * Outbound calls to operator-configured endpoints (model providers, tools,
 * retrieval). Every failure becomes an UpstreamError whose message is safe to
 * show once scrubbed of the resource's secrets (see secrets.ts).
 */

export type UpstreamFailure = "network" | "http" | "invalid_response" | "too_large";

export class UpstreamError extends Error {
  override readonly name = "UpstreamError";
  constructor(
    readonly kind: UpstreamFailure,
    message: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** The provider's side failed (down, overloaded, throttling, garbage): another provider may do better. */
  get providerFault(): boolean {
    if (this.kind === "network" || this.kind === "invalid_response") return true;
    const s = this.status ?? 0;
    return this.kind === "http" && (s >= 500 || s === 429 || s === 408);
  }
}

/** An aborted call rethrows its signal's reason when the host set one (deadline, timeout, run ended). */
function abortReason(signal: AbortSignal, fallback: unknown): unknown {
  return signal.aborted && signal.reason instanceof Error && signal.reason.name !== "AbortError" ? signal.reason : fallback;
}

export async function upstreamFetch(url: string, init: RequestInit & { signal: AbortSignal }): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    throw abortReason(init.signal, new UpstreamError("network", `request to ${new URL(url).origin} failed: ${(err as Error).message}`, undefined, { cause: err }));
  }
}

/** Read a body up to `maxBytes`, refusing (not truncating) a larger one. */
export async function readText(res: Response, maxBytes: number, signal: AbortSignal): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let total = 0;
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
      if (total > maxBytes) throw new UpstreamError("too_large", `response is larger than ${maxBytes} bytes`);
      text += decoder.decode(value, { stream: true });
    }
  } catch (err) {
    if (err instanceof UpstreamError) throw err;
    throw abortReason(signal, new UpstreamError("network", `response broke off: ${(err as Error).message}`, undefined, { cause: err }));
  } finally {
    reader.cancel().catch(() => {});
  }
  return text + decoder.decode();
}

/** A non-2xx answer as an error, with the start of its body (the caller scrubs secrets). */
export async function httpError(res: Response, what: string, signal: AbortSignal): Promise<UpstreamError> {
  const body = await readText(res, 64 * 1024, signal).catch(() => "");
  const snippet = body.trim().slice(0, 300);
  return new UpstreamError("http", `${what} answered HTTP ${res.status}${snippet ? `: ${snippet}` : ""}`, res.status);
}

export async function readJson(res: Response, maxBytes: number, signal: AbortSignal, what: string): Promise<unknown> {
  const text = await readText(res, maxBytes, signal);
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new UpstreamError("invalid_response", `${what} did not answer JSON`, res.status, { cause });
  }
}

export const joinUrl = (base: string, path: string) => `${base.replace(/\/+$/, "")}${path}`;
