/** `chunks` as one array of `size` bytes (their lengths' sum), copied once; a single chunk is answered as it is. */
export function concatBytes(chunks: readonly Uint8Array[], size = chunks.reduce((n, c) => n + c.length, 0)): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const joined = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    joined.set(chunk, at);
    at += chunk.length;
  }
  return joined;
}
