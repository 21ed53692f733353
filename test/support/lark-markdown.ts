/**
 * What is wrong with a Lark card `markdown` element's content as the host writes it, or null: stricter than Lark (which
 * renders what it can), so a test catches output that merely happens to render. Code blocks are fenced and closed,
 * with a language or none; outside code every character Lark's Markdown acts on is an entity, or one of the host's
 * constructs: `*` and `~~` paired on a line, code spans closed on their line, links `[…](http(s)://…)`,
 * headings, `> ` quotes, `• ` bullets (`◦ ` and `▪ ` nested, indented by `&nbsp;`), `<hr>` rules, GFM tables (a blank
 * line around each, every row as many cells as the header, each cell such a line's text, a pipe in it `\|`, `<br>`
 * its only tag). Nowhere (code included) does `<at` reach Lark as a mention, and no line starts as a list item, an
 * indented code block or a setext underline would.
 */
const TABLE_ROW = /^\| (.*) \|$/;
const DELIMITER_ROW = /^\| :?---:?(?: \| :?---:?)* \|$/;
/** A table's row's cells: between ` | ` not escaped. */
const cellsOf = (row: string) => TABLE_ROW.exec(row)![1].split(/(?<!\\) \| /);
const FENCE = /^(`{3,})([A-Za-z0-9_+#.-]*)$/;
/** A quote's `> `, then a heading's or a bullet's start, after which the line is inline text whatever it starts with. */
const PREFIX = /^(?:> )?((?:#{1,6} |(?:&nbsp;)*[•◦▪] )?)/;
const MENTION = /<\s*at\b/i;
const ENTITY = /^&(?:#\d{1,6}|nbsp);/;

export function larkMarkdownProblem(content: string): string | null {
  if (!content.trim()) return "no text to show";
  const lines = content.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const fence = FENCE.exec(lines[n]);
    if (fence) {
      const close = lines.indexOf(fence[1], n + 1);
      if (close < 0) return `the code block opened on line ${n + 1} is never closed`;
      const code = lines.slice(n + 1, close).join("\n");
      if (MENTION.test(code)) return `a mention in the code block on line ${n + 1}`;
      if (code.split("\n").some((line) => line.startsWith(fence[1]))) return `the code block on line ${n + 1} holds its own fence`;
      n = close;
      continue;
    }
    if (TABLE_ROW.test(lines[n]) && DELIMITER_ROW.test(lines[n + 1] ?? "")) {
      if (n > 0 && lines[n - 1] !== "") return `no blank line before the table on line ${n + 1}`;
      const columns = cellsOf(lines[n]).length;
      if (lines[n + 1].split(" | ").length !== columns) return `the table on line ${n + 1}: a delimiter row of another width`;
      let end = n + 2;
      while (end < lines.length && TABLE_ROW.test(lines[end])) end++;
      if (end < lines.length && lines[end] !== "") return `no blank line after the table on line ${n + 1}`;
      for (const row of [n, ...Array.from({ length: end - n - 2 }, (_, k) => n + 2 + k)]) {
        const cells = cellsOf(lines[row]);
        if (cells.length !== columns) return `line ${row + 1}: ${cells.length} cells in a table of ${columns}`;
        for (const cell of cells) {
          const problem = lineProblem(cell.replace(/\\\|/g, "").replace(/<br>/g, " "), true);
          if (problem) return `line ${row + 1}, cell ${JSON.stringify(cell)}: ${problem}`;
        }
      }
      n = end - 1;
      continue;
    }
    const problem = lineProblem(lines[n]);
    if (problem) return `line ${n + 1} (${JSON.stringify(lines[n])}): ${problem}`;
  }
  return null;
}

function lineProblem(line: string, cell = false): string | null {
  if (line === "<hr>" || line === "> <hr>") return null;
  const prefix = cell ? ["", ""] : PREFIX.exec(line)!;
  const rest = line.slice(prefix[0].length);
  if (!cell && !prefix[1] && /^(?:[ \t]|[-+=#>]|\d+[.)])/.test(rest)) return "it starts as Markdown would read as a block";
  const markers = [0, 0];
  let inLabel = false;
  for (let i = 0; i < rest.length; ) {
    const c = rest[i];
    const entity = ENTITY.exec(rest.slice(i));
    if (entity) i += entity[0].length;
    else if (c === "`") {
      const run = /^`+/.exec(rest.slice(i))![0];
      const close = rest.indexOf(run, i + run.length);
      if (close < 0 || rest[close + run.length] === "`") return "a code span never closed";
      if (MENTION.test(rest.slice(i, close))) return "a mention in a code span";
      i = close + run.length;
    } else if (c === "*" || (c === "~" && rest[i + 1] === "~")) {
      // `***` opens `*` and `**` in either order: only the counts are checked.
      markers[c === "*" ? 0 : 1] += c === "*" ? 1 : 2;
      i += c === "*" ? 1 : 2;
    } else if (c === "[" && !inLabel) {
      inLabel = true;
      i++;
    } else if (c === "]" && inLabel) {
      const target = /^\](\(https?:\/\/[^\s()<>\\`]+\))/i.exec(rest.slice(i));
      if (!target) return "a link without an http(s) target";
      inLabel = false;
      i += target[0].length;
    } else if (/[\\<>&|_~[\]]/.test(c) || (c === ":" && /[A-Za-z]/.test(rest[i + 1] ?? ""))) return `a raw ${JSON.stringify(c)} at ${i}`;
    else i++;
  }
  if (inLabel) return "a link never closed";
  if (markers[0] % 2 || markers[1] % 4) return "an unpaired emphasis marker";
  return null;
}

/**
 * What Lark would refuse of a message's `content` for its `msg_type` (text, or a card: JSON 1.0 of one `plain_text`
 * div, or JSON 2.0 of one `markdown` element or `plain_text` div, updatable by patch), or null; and the card's schema,
 * which a patch must keep.
 */
export function larkMessageProblem(msgType: string, content: string): { problem: string | null; schema?: "1.0" | "2.0" } {
  let parsed: any;
  try {
    parsed = JSON.parse(content);
  } catch {
    return { problem: "content is not JSON" };
  }
  if (msgType === "text") return { problem: typeof parsed.text === "string" && Object.keys(parsed).length === 1 && parsed.text.trim() ? null : "not a text message's content" };
  if (msgType !== "interactive") return { problem: null };
  const plainDiv = (e: any) => e?.tag === "div" && e.text?.tag === "plain_text" && typeof e.text.content === "string" && e.text.content.trim() !== "";
  if (parsed.schema === "2.0") {
    const keys = Object.keys(parsed).sort().join();
    const [element, ...more] = parsed.body?.elements ?? [];
    if (keys !== "body,config,schema" || Object.keys(parsed.config).join() !== "update_multi" || parsed.config.update_multi !== true || more.length) return { problem: "not a card 2.0 of one element, updatable", schema: "2.0" };
    if (element?.tag === "markdown" && Object.keys(element).sort().join() === "content,tag") return { problem: larkMarkdownProblem(String(element.content)), schema: "2.0" };
    return { problem: plainDiv(element) ? null : "neither a markdown element nor a plain_text div", schema: "2.0" };
  }
  const ok = parsed.config?.update_multi === true && parsed.elements?.length === 1 && plainDiv(parsed.elements[0]);
  return { problem: ok ? null : "not a card 1.0 of one plain_text div, updatable", schema: "1.0" };
}
