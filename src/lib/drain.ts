/**
 * A refused request's body still on its way is read and thrown away, up to
 * this many bytes, before the answer is sent: an HTTP client still writing
 * when the server answers and closes may see a connection reset instead of
 * the answer. A larger body is cut (the reset is then the answer).
 */
export const DRAIN_MAX_BYTES = 16 * 1024 * 1024;

/** Reads `body` to its end and discards it, or cancels it once more than `maxBytes` have come (or are declared). */
export async function drainBody(request: Request, maxBytes = DRAIN_MAX_BYTES): Promise<void> {
  const body = request.body;
  if (!body || body.locked) return;
  const declared = Number(request.headers.get("content-length") ?? NaN);
  const reader = body.getReader();
  try {
    if (declared > maxBytes) return void (await reader.cancel());
    for (let seen = 0; ; ) {
      const { done, value } = await reader.read();
      if (done) return;
      seen += value.length;
      if (seen > maxBytes) return void (await reader.cancel());
    }
  } catch {
    // The client went away: nothing left to drain.
  } finally {
    reader.releaseLock();
  }
}
