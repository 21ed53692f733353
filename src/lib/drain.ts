/**
 * A refused request's body still on its way is read and thrown away before
 * the answer is sent: an HTTP client still writing when the server answers
 * and closes may see a connection reset instead of the answer. The drain is
 * bounded in bytes and time, so a refusal never costs more than that; past
 * either bound the body is cut (and the reset is the answer).
 */
export const DRAIN_MAX_BYTES = 4 * 1024 * 1024;
export const DRAIN_MAX_MS = 5_000;

/** Reads the request's body to its end and discards it, or cancels it once a bound is passed (or declared past). */
export async function drainBody(request: Request, maxBytes = DRAIN_MAX_BYTES, maxMs = DRAIN_MAX_MS): Promise<void> {
  const body = request.body;
  if (!body || body.locked) return;
  const reader = body.getReader();
  try {
    await drainDeclared(reader, Number(request.headers.get("content-length") ?? NaN), maxBytes, maxMs);
  } finally {
    reader.releaseLock();
  }
}

/**
 * The rest of a body whose length says `left` bytes are still to come (NaN: not said): past `maxBytes` it is cut at
 * once, as draining would cut it there anyway, after keeping the answer back; else drained as drainReader does.
 */
export async function drainDeclared(reader: ReadableStreamDefaultReader<Uint8Array>, left: number, maxBytes = DRAIN_MAX_BYTES, maxMs = DRAIN_MAX_MS): Promise<void> {
  if (left > maxBytes) return await reader.cancel().catch(() => {});
  await drainReader(reader, maxBytes, maxMs);
}

/** The rest of a body already being read, discarded within the same bounds (a chunked upload refused mid-way). */
export async function drainReader(reader: ReadableStreamDefaultReader<Uint8Array>, maxBytes = DRAIN_MAX_BYTES, maxMs = DRAIN_MAX_MS): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(resolve, maxMs, "late")));
  try {
    for (let seen = 0; ; ) {
      const pending = reader.read();
      const read = await Promise.race([pending, late]);
      if (read === "late") {
        // The lock cannot be released with a read outstanding: the cancel settles it.
        await reader.cancel();
        await pending.catch(() => {});
        return;
      }
      if (read.done) return;
      seen += read.value.length;
      if (seen > maxBytes) return await reader.cancel();
    }
  } catch {
    // The client went away: nothing left to drain.
  } finally {
    clearTimeout(timer);
  }
}
