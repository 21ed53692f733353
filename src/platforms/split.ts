/**
 * Split a reply into parts of at most `max` UTF-16 code units, the unit
 * platforms count in. A part ends at the last line break, else the last
 * space, in its second half; otherwise it is cut hard, never inside a
 * surrogate pair. Deterministic, so a growing stream splits the same way
 * every time and the parts already sent stay stable.
 */
export function splitMessage(text: string, max: number): string[] {
  if (max < 2) throw new Error("max message size must be at least 2");
  const parts: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const window = rest.slice(0, max);
    let cut = window.lastIndexOf("\n");
    if (cut < max / 2) cut = window.lastIndexOf(" ");
    if (cut < max / 2) cut = max;
    else cut += 1; // the separator stays with the part before it
    const code = rest.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut -= 1; // a high surrogate never ends a part
    parts.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (rest.length || parts.length === 0) parts.push(rest);
  return parts;
}
