/**
 * The smallest string greater than every string that starts with `prefix`,
 * for a `key >= prefix AND key < bound` index range. SQLite compares text as
 * UTF-8 bytes, which orders like code points, so the bound is the prefix with
 * its last code point incremented (skipping surrogates, carrying past
 * U+10FFFF). Undefined when no bound exists (a prefix of only U+10FFFF).
 */
export function prefixUpperBound(prefix: string): string | undefined {
  const codePoints = Array.from(prefix, (c) => c.codePointAt(0)!);
  while (codePoints.length) {
    const last = codePoints.pop()!;
    if (last < 0x10ffff) {
      const next = last === 0xd7ff ? 0xe000 : last + 1;
      return String.fromCodePoint(...codePoints, next);
    }
  }
  return undefined;
}
