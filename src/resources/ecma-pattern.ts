import { RE2JS } from "re2js";

/** A compiled schema pattern: whether it is found in a text. */
export interface Pattern {
  test(text: string): boolean;
}

/** ECMA-262's `\s`: whitespace and line terminators, Unicode's spaces included (RE2's `\s` is ASCII only, without even \v). */
const ECMA_SPACE = "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
/** ECMA-262's `.`: anything but a line terminator (RE2's stops only at \n). */
const ECMA_DOT = "[^\\n\\r\\x{2028}\\x{2029}]";

/**
 * A JSON Schema pattern (an ECMA-262 regular expression) in RE2's syntax, or null when RE2 cannot say the
 * same thing. Where the two dialects read the same text differently it is rewritten: `\s`, `\S` and `.`
 * (Unicode spaces and line terminators), `\uXXXX` and `\u{X}` (RE2's `\x{X}`), and the classes `[]` (matches
 * nothing) and `[^]` (matches anything). `\S` inside a class has no RE2 spelling: refused.
 */
export function ecmaToRe2(source: string): string | null {
  let out = "";
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\") {
      const next = source[i + 1];
      if (next === undefined) return null;
      const unicode = /^u\{([0-9a-fA-F]+)\}|^u([0-9a-fA-F]{4})/.exec(source.slice(i + 1));
      if (unicode) {
        out += `\\x{${unicode[1] ?? unicode[2]}}`;
        i += unicode[0].length;
        continue;
      }
      i++;
      if (next === "s") out += inClass ? ECMA_SPACE : `[${ECMA_SPACE}]`;
      else if (next === "S") {
        if (inClass) return null;
        out += `[^${ECMA_SPACE}]`;
      } else out += c + next;
    } else if (!inClass && c === "[") {
      if (source.startsWith("[]", i)) {
        out += "[^\\x{0}-\\x{10FFFF}]";
        i += 1;
      } else if (source.startsWith("[^]", i)) {
        out += "(?s:.)";
        i += 2;
      } else {
        inClass = true;
        out += c;
        // A leading `^` and then a `]` right after it are part of the class, as in both dialects.
        if (source[i + 1] === "^") out += source[++i];
      }
    } else if (inClass && c === "]") {
      inClass = false;
      out += c;
    } else if (!inClass && c === ".") out += ECMA_DOT;
    else out += c;
  }
  return inClass ? null : out;
}

/**
 * A schema pattern, run by RE2 (re2js): matching takes time linear in the text whatever the pattern, so a
 * tool's schema cannot make one call's validation hold the Worker for seconds (`^(a+)+$` against "aaaa…!"
 * backtracks exponentially in JavaScript's own engine). Read as ECMA-262 (see ecmaToRe2). Null for what RE2
 * cannot run: an invalid pattern, and lookaround and backreferences, which no linear-time engine has.
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
