import { drainReader } from "../lib/drain";
import { concatBytes } from "../lib/bytes";

/**
 * A request or response body read whole, but never more than `maxBytes`: a
 * declared Content-Length over the cap is refused before reading, and an
 * undeclared or lying one is cut off as soon as the count passes the cap
 * (or, with `drainOverflow`, a request whose client waits for its answer,
 * the rest is drained within drainReader's bounds, so it reads a 413, not a reset).
 */
export async function readCapped(res: Request | Response, maxBytes: number, opts: { drainOverflow?: boolean } = {}): Promise<Uint8Array | "too_large"> {
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (declared > maxBytes) {
    await res.body?.cancel();
    return "too_large";
  }
  if (!res.body) return new Uint8Array();
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > maxBytes) {
      await (opts.drainOverflow ? drainReader(reader) : reader.cancel());
      return "too_large";
    }
    chunks.push(value);
  }
  return concatBytes(chunks, total);
}
