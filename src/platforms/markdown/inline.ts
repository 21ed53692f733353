/**
 * One line of Markdown (as language models write it) as a tree a platform renders in its own terms (Telegram HTML,
 * Lark card Markdown, Slack mrkdwn): emphasis (`*`, `_`, `**`, `__`), `~~strikethrough~~`, code spans, links,
 * autolinks and bare URLs. Emphasis follows CommonMark's delimiter rules, so an underscore inside a word (snake_case)
 * is text, and a marker that finds no partner stays as the text it is: a tree never holds an unbalanced span, whatever
 * the input (a draft cut mid-span included). Everything else is text.
 */

export type Tag = "b" | "i" | "s";

export type Inline =
  | { kind: "text"; text: string }
  /** `source` is the span as written, backticks included. */
  | { kind: "code"; code: string; source: string }
  /** A bare URL, kept whole (no `_` or `*` in it is taken for emphasis); the platform links it or not. */
  | { kind: "url"; url: string }
  /** `source` is the link (or autolink) as written. */
  | { kind: "link"; url: string; label: Inline[]; source: string }
  /**
   * `marker` opened (and closed) it as written (`**`, `__`, `~~`…); `before` and `after` are the characters just
   * outside those (a line's edge is a space): Slack formats no span inside a word, so it keeps such a one as written.
   */
  | { kind: "span"; tag: Tag; marker: string; children: Inline[]; before: string; after: string };

/** The schemes a link may have on the platform; any other link stays as the text it was written as. */
export interface InlineOptions {
  linkTarget: RegExp;
}

type Delim = { kind: "delim"; char: "*" | "_" | "~"; count: number; length: number; canOpen: boolean; canClose: boolean; before: string; after: string };
type Node = Inline | Delim;

const ASCII_PUNCTUATION = /[!-/:-@[-`{-~]/;
const PUNCTUATION = /[\p{P}\p{S}]/u;
const WHITESPACE = /\s/u;
const BARE_URL = /^(?:https?:\/\/|www\.)[^\s<]+/i;
const AUTOLINK = /^<([a-z][a-z0-9+.-]{1,31}:[^\s<>]*)>/i;

/** A line of Markdown as a tree; `inLink` for a link's label (no link, autolink or code span in it). */
export function parseInline(line: string, opts: InlineOptions, inLink = false): Inline[] {
  const nodes = scan(line, opts, inLink);
  matchEmphasis(nodes);
  return nodes.map(asText).filter((n) => n.kind !== "text" || n.text !== "");
}

/** Whether a tree shows any text: a platform refuses, or drops, an entity without any. */
export function visibleNodes(nodes: readonly Inline[]): boolean {
  return nodes.some((n) => {
    if (n.kind === "text") return n.text.trim() !== "";
    if (n.kind === "code") return n.code.trim() !== "";
    if (n.kind === "url") return true;
    return visibleNodes(n.kind === "link" ? n.label : n.children);
  });
}

/** A marker left unpaired is the text it was typed as. */
const asText = (n: Node): Inline => (n.kind === "delim" ? { kind: "text", text: n.char.repeat(n.count) } : n);

function scan(text: string, opts: InlineOptions, inLink: boolean): Node[] {
  const nodes: Node[] = [];
  const brackets = inLink || !text.includes("[") ? new Map<number, number>() : bracketPairs(text);
  let plain = "";
  const flush = () => {
    if (plain) nodes.push({ kind: "text", text: plain });
    plain = "";
  };
  const push = (node: Node) => {
    flush();
    nodes.push(node);
  };
  for (let i = 0; i < text.length; ) {
    const c = text[i];
    if (c === "\\" && ASCII_PUNCTUATION.test(text[i + 1] ?? "")) {
      plain += text[i + 1];
      i += 2;
    } else if (c === "`") {
      const run = runOf(text, i);
      const close = closingBackticks(text, i + run, run);
      if (close < 0) {
        plain += text.slice(i, i + run);
      } else {
        // No code inside a link (Telegram takes none): there it is the link's text.
        const code = codeSpanText(text.slice(i + run, close));
        push(inLink ? { kind: "text", text: code } : { kind: "code", code, source: text.slice(i, close + run) });
      }
      i = close < 0 ? i + run : close + run;
    } else if (c === "*" || c === "_" || c === "~") {
      const run = runOf(text, i);
      // Only a double tilde strikes through: a single one is "about" (~5 min).
      if (c === "~" && run !== 2) plain += text.slice(i, i + run);
      else {
        flush();
        nodes.push(delimiter(text, i, run));
      }
      i += run;
    } else if (!inLink && (c === "[" || (c === "!" && text[i + 1] === "["))) {
      const link = linkAt(text, c === "!" ? i + 1 : i, brackets);
      if (!link) {
        plain += c;
        i++;
        continue;
      }
      if (!opts.linkTarget.test(link.url)) push({ kind: "text", text: text.slice(i, link.end) });
      else {
        // An image is linked to, its alt text the link's: the chat shows no picture from a URL.
        const label: Inline[] = c === "!" ? [{ kind: "text", text: link.label }] : parseInline(link.label, opts, true);
        push({ kind: "link", url: link.url, label: visibleNodes(label) ? label : [{ kind: "text", text: link.url }], source: text.slice(i, link.end) });
      }
      i = link.end;
    } else if (c === "<" && !inLink && AUTOLINK.test(text.slice(i))) {
      const [whole, url] = AUTOLINK.exec(text.slice(i))!;
      push(opts.linkTarget.test(url) ? { kind: "link", url, label: [{ kind: "text", text: url }], source: whole } : { kind: "text", text: whole });
      i += whole.length;
    } else if ((c === "h" || c === "H" || c === "w" || c === "W") && !/[\p{L}\p{N}]/u.test(text[i - 1] ?? "") && BARE_URL.test(text.slice(i))) {
      const url = trimmedUrl(BARE_URL.exec(text.slice(i))![0]);
      if (inLink) plain += url;
      else push({ kind: "url", url });
      i += url.length;
    } else {
      plain += c;
      i++;
    }
  }
  flush();
  return nodes;
}

const runOf = (text: string, at: number) => {
  let end = at;
  while (text[end] === text[at]) end++;
  return end - at;
};

/** Where the run of exactly `length` backticks that closes a code span begins, or -1. */
function closingBackticks(text: string, from: number, length: number): number {
  for (let i = text.indexOf("`", from); i >= 0; i = text.indexOf("`", i)) {
    const run = runOf(text, i);
    if (run === length) return i;
    i += run;
  }
  return -1;
}

/** CommonMark: one space is stripped from each end when both have one and the span is not all spaces. */
const codeSpanText = (code: string) => (code.length > 2 && code.startsWith(" ") && code.endsWith(" ") && code.trim() ? code.slice(1, -1) : code);

/** The character before or after a position, a whole code point (an emoji is a symbol, not a letter); a line's edge is whitespace. */
function charBefore(text: string, at: number): string {
  if (at <= 0) return " ";
  const low = text.charCodeAt(at - 1);
  return low >= 0xdc00 && low <= 0xdfff && at >= 2 ? text.slice(at - 2, at) : text[at - 1];
}
const charAfter = (text: string, at: number) => (at >= text.length ? " " : String.fromCodePoint(text.codePointAt(at)!));

/** CommonMark's flanking rules: whether a run of markers may open or close emphasis. */
function delimiter(text: string, at: number, run: number): Delim {
  const char = text[at] as Delim["char"];
  const before = charBefore(text, at);
  const after = charAfter(text, at + run);
  const [spaceBefore, spaceAfter] = [WHITESPACE.test(before), WHITESPACE.test(after)];
  const [punctBefore, punctAfter] = [PUNCTUATION.test(before), PUNCTUATION.test(after)];
  const left = !spaceAfter && (!punctAfter || spaceBefore || punctBefore);
  const right = !spaceBefore && (!punctBefore || spaceAfter || punctAfter);
  // An underscore inside a word (snake_case, file_name_here) neither opens nor closes.
  const canOpen = char === "_" ? left && (!right || punctBefore) : left;
  const canClose = char === "_" ? right && (!left || punctAfter) : right;
  return { kind: "delim", char, count: run, length: run, canOpen, canClose, before, after };
}

/**
 * Pairs openers with closers (CommonMark's "process emphasis"): what lies between a pair becomes the span's. As cmark,
 * it remembers per kind of closer how far down openers were all tried in vain (`bottom`), so a line of closers that
 * pair with nothing takes linear time, not a scan back to the line's start for each.
 */
function matchEmphasis(nodes: Node[]): void {
  const bottom = new Map<string, number>();
  for (let c = 0; c < nodes.length; c++) {
    const closer = nodes[c];
    if (closer.kind !== "delim" || !closer.canClose) continue;
    // What decides which openers may pair with a closer, besides their own flags (which never change).
    const key = `${closer.char}${closer.canOpen ? 1 : 0}${closer.length % 3}`;
    while (closer.count > 0) {
      const o = openerFor(nodes, c, closer, bottom.get(key) ?? 0);
      if (o < 0) {
        bottom.set(key, c);
        break;
      }
      const opener = nodes[o] as Delim;
      const use = closer.char === "~" || (opener.count >= 2 && closer.count >= 2) ? 2 : 1;
      const tag: Tag = closer.char === "~" ? "s" : use === 2 ? "b" : "i";
      // Markers left unpaired inside the span can no longer pair with anything outside it: they are text.
      const children = nodes.slice(o + 1, c).map(asText);
      opener.count -= use;
      closer.count -= use;
      nodes.splice(o + 1, c - o - 1, { kind: "span", tag, marker: closer.char.repeat(use), children, before: opener.before, after: closer.after });
      // A bound inside what became the span is the span's index (no opener in it); one past it moves with the nodes.
      for (const [k, b] of bottom) if (b > o) bottom.set(k, b < c ? o + 1 : b - (c - o - 2));
      c = o + 2;
    }
  }
}

function openerFor(nodes: Node[], before: number, closer: Delim, bottom: number): number {
  for (let o = before - 1; o >= bottom; o--) {
    const n = nodes[o];
    if (n.kind !== "delim" || n.char !== closer.char || !n.canOpen || n.count === 0) continue;
    // The rule of three: `*foo**bar*` is one emphasis, not two broken ones.
    if ((n.canClose || closer.canOpen) && (n.length + closer.length) % 3 === 0 && !(n.length % 3 === 0 && closer.length % 3 === 0)) continue;
    return o;
  }
  return -1;
}

/** Each `[` with the `]` that closes it, nested ones paired inside; brackets in code spans or escaped are text. One pass. */
function bracketPairs(text: string): Map<number, number> {
  const pairs = new Map<number, number>();
  const open: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === "`") {
      const run = runOf(text, i);
      const end = closingBackticks(text, i + run, run);
      i = (end < 0 ? i : end) + run - 1;
    } else if (c === "[") open.push(i);
    else if (c === "]" && open.length) pairs.set(open.pop()!, i);
  }
  return pairs;
}

/** A link `[label](url "title")` (or an image's `![alt](url)`) starting at `at`, or null when it is not one. */
function linkAt(text: string, at: number, brackets: Map<number, number>): { label: string; url: string; end: number } | null {
  const close = brackets.get(at) ?? -1;
  if (close < 0 || text[close + 1] !== "(") return null;
  const target = destination(text, close + 2);
  if (!target) return null;
  return { label: text.slice(at + 1, close), url: target.url, end: target.end };
}

/** A link's destination and optional title up to its `)`: parentheses inside it balanced, as in a Wikipedia URL. */
function destination(text: string, from: number): { url: string; end: number } | null {
  let i = from;
  while (text[i] === " ") i++;
  let url = "";
  if (text[i] === "<") {
    const end = text.indexOf(">", i);
    if (end < 0 || text.slice(i + 1, end).includes("<")) return null;
    url = text.slice(i + 1, end).replace(/\s/g, "%20");
    i = end + 1;
  } else {
    let depth = 0;
    for (; i < text.length; i++) {
      const c = text[i];
      if (WHITESPACE.test(c) || (c === ")" && depth === 0)) break;
      if (c === "\\" && ASCII_PUNCTUATION.test(text[i + 1] ?? "")) url += text[++i];
      else {
        // As cmark: a destination nests at most 32 parentheses deep (nor is a scan past that worth its time).
        if (c === "(" && ++depth > 32) return null;
        if (c === ")") depth--;
        url += c;
      }
    }
    if (depth !== 0) return null;
  }
  const title = /^\s+(?:"[^"]*"|'[^']*'|\([^()]*\))/.exec(text.slice(i));
  if (title) i += title[0].length;
  while (text[i] === " ") i++;
  return url && text[i] === ")" ? { url, end: i + 1 } : null;
}

/**
 * GFM's autolink end: trailing punctuation is the sentence's, and so is a `)` the URL did not open. The parentheses are
 * counted once, not again for each one trimmed (that took quadratic time on a URL ending in a run of them).
 */
function trimmedUrl(url: string): string {
  let unopened = 0;
  for (const c of url) unopened += c === ")" ? 1 : c === "(" ? -1 : 0;
  let end = url.length;
  for (;;) {
    const last = url[end - 1];
    if (end > 1 && /[?!.,:;*_~'"]/.test(last)) end--;
    else if (end > 1 && last === ")" && unopened > 0) {
      end--;
      unopened--;
    } else return url.slice(0, end);
  }
}
