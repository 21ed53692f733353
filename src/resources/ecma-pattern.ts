import { RE2JS } from "re2js";

/** A compiled schema pattern: whether it is found in a text. */
export interface Pattern {
  test(text: string): boolean;
}

/** ECMA-262's `\s`, item by item: whitespace and line terminators, Unicode's spaces included (RE2's `\s` is ASCII only, without even \v). */
const SPACE_ITEMS = ["\\t", "\\n", "\\x{0B}", "\\f", "\\r", " ", "\\x{A0}", "\\x{1680}", "\\x{2000}-\\x{200A}", "\\x{2028}", "\\x{2029}", "\\x{202F}", "\\x{205F}", "\\x{3000}", "\\x{FEFF}"];
const ECMA_SPACE = SPACE_ITEMS.join("");
/** ECMA-262's `.`: anything but a line terminator (RE2's stops only at \n). */
const ECMA_DOT = "[^\\n\\r\\x{2028}\\x{2029}]";
/** How a class member that is one of the spaces is spelled in SPACE_ITEMS. */
const SPACE_MEMBER: Record<string, string> = { "\\t": "\\t", "\\n": "\\n", "\\v": "\\x{0B}", "\\f": "\\f", "\\r": "\\r", " ": " " };

/** `\uXXXX` / `\u{X}` at `at` (the backslash), as RE2's `\x{X}`, and its length in the source; null when not one. */
function unicodeEscape(source: string, at: number): [string, number] | null {
  const m = /^\\u\{([0-9a-fA-F]+)\}|^\\u([0-9a-fA-F]{4})/.exec(source.slice(at, at + 12));
  return m ? [`\\x{${m[1] ?? m[2]}}`, m[0].length] : null;
}

/**
 * A character class (`source[at]` is its `[`) in RE2's syntax and the index after its `]`, or null. `\s` becomes
 * the ECMA set; `\S` has no spelling inside an RE2 class, so a class with it is rewritten: `[a\S]` as
 * `(?:[a]|[^spaces])`, and `[^\S\n]` (spaces but these) as the spaces less the ones named; anything else
 * beside a negated `\S` is refused.
 */
function ecmaClass(source: string, at: number): [string, number] | null {
  const negated = source[at + 1] === "^";
  const members: string[] = [];
  let notSpace = false;
  let i = at + (negated ? 2 : 1);
  // A `]` first is a member, as in both dialects (after `[` or `[^`: the empty forms were handled before).
  for (let first = true; i < source.length && (first || source[i] !== "]"); first = false) {
    if (source[i] !== "\\") {
      members.push(source[i++]);
      continue;
    }
    const unicode = unicodeEscape(source, i);
    if (unicode) {
      members.push(unicode[0]);
      i += unicode[1];
      continue;
    }
    const escape = source.slice(i, i + 2);
    if (escape.length < 2) return null;
    if (escape === "\\S") notSpace = true;
    else members.push(escape === "\\s" ? ECMA_SPACE : escape);
    i += 2;
  }
  if (i >= source.length) return null;
  const end = i + 1;
  if (!notSpace) return [`[${negated ? "^" : ""}${members.join("")}]`, end];
  if (!negated) return [members.length ? `(?:[${members.join("")}]|[^${ECMA_SPACE}])` : `[^${ECMA_SPACE}]`, end];
  const excluded = members.map((m) => SPACE_MEMBER[m]);
  if (excluded.some((m) => m === undefined)) return null;
  const left = SPACE_ITEMS.filter((item) => !excluded.includes(item));
  return [left.length ? `[${left.join("")}]` : "[^\\x{0}-\\x{10FFFF}]", end];
}

/**
 * A JSON Schema pattern (an ECMA-262 regular expression) in RE2's syntax, or null when RE2 cannot say the
 * same thing. Where the two dialects read the same text differently it is rewritten: `\s`, `\S` and `.`
 * (Unicode spaces and line terminators; see ecmaClass for classes), `\uXXXX` and `\u{X}` (RE2's `\x{X}`),
 * and the classes `[]` (matches nothing) and `[^]` (matches anything).
 */
export function ecmaToRe2(source: string): string | null {
  let out = "";
  for (let i = 0; i < source.length; ) {
    const c = source[i];
    if (c === "\\") {
      const unicode = unicodeEscape(source, i);
      if (unicode) {
        out += unicode[0];
        i += unicode[1];
        continue;
      }
      const next = source[i + 1];
      if (next === undefined) return null;
      out += next === "s" ? `[${ECMA_SPACE}]` : next === "S" ? `[^${ECMA_SPACE}]` : c + next;
      i += 2;
    } else if (c === "[") {
      if (source.startsWith("[]", i) || source.startsWith("[^]", i)) {
        out += source[i + 1] === "]" ? "[^\\x{0}-\\x{10FFFF}]" : "(?s:.)";
        i += source[i + 1] === "]" ? 2 : 3;
        continue;
      }
      const cls = ecmaClass(source, i);
      if (!cls) return null;
      out += cls[0];
      i = cls[1];
    } else {
      out += c === "." ? ECMA_DOT : c;
      i++;
    }
  }
  return out;
}

/**
 * A schema pattern, run by RE2 (re2js): matching takes time linear in the text whatever the pattern, so a
 * tool's schema cannot make one call's validation hold the Worker for seconds (`^(a+)+$` against "aaaa…!"
 * backtracks exponentially in JavaScript's own engine). Read as ECMA-262 (see ecmaToRe2). Null for what RE2
 * cannot run: an invalid pattern, lookaround and backreferences, which no linear-time engine has, and counted repeats over 1000 (RE2's limit).
 */
export function compilePattern(source: string): Pattern | null {
  const re2Source = ecmaToRe2(source);
  if (re2Source === null) return null;
  try {
    const re = RE2JS.compile(re2Source);
    return { test: (text) => re.test(text) };
  } catch {
    return null;
  }
}
