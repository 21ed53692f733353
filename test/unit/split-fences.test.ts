import { describe, expect, it } from "vitest";
import { markdownBlocks } from "../../src/platforms/markdown/blocks";
import { slackMrkdwn } from "../../src/platforms/slack/mrkdwn";
import { slackSentUnits } from "../../src/platforms/slack/text";
import { splitMessage } from "../../src/platforms/split";

/**
 * The split reads code fences as the shared parser (src/platforms/markdown/blocks.ts) does, so every part of a split
 * reply is code exactly where the whole is: a ```` block's ``` lines, a long fence, a fence line or a prose line with
 * ``` in it at a cut. Checked against the parser itself, per code unit of the reply.
 */

/** For each code unit of the text, whether the parser reads it as code (a code block's line, not its fences). */
function codeUnits(text: string): boolean[] {
  const spans: Array<[number, number]> = [];
  let offset = 0;
  for (const line of text.split(/\r?\n/)) {
    spans.push([offset, offset + line.length]);
    offset += line.length + (text[offset + line.length] === "\r" ? 2 : 1);
  }
  const code = new Array<boolean>(text.length).fill(false);
  let line = 0;
  for (const block of markdownBlocks(text)) {
    if (block.kind !== "code") {
      line += block.kind === "quote" ? block.lines.length : 1;
      continue;
    }
    for (let k = 1; k <= block.lines.length; k++) code.fill(true, ...spans[line + k]);
    line += 1 + block.lines.length + (block.closed ? 1 : 0);
  }
  return code;
}

type Piece = { part: string; at: number; from: number; piece: string };

/**
 * Where each part's text comes from in the reply: a part is, in order, the line reopening a block the part before
 * closed (if it did), a piece of the reply, and the fence line closing a block (if the split added one).
 */
function pieces(text: string, parts: string[], i = 0, from = 0, reopened = false): Piece[] | null {
  if (i === parts.length) return from === text.length ? [] : null;
  const part = parts[i];
  const at = reopened ? part.indexOf("\n") + 1 : 0;
  if (reopened && (at === 0 || !/^ {0,3}`{3,}[^`]*$/.test(part.slice(0, at - 1)))) return null;
  const body = part.slice(at);
  const closer = i < parts.length - 1 ? /\n`{3,}$/.exec(body) : null;
  const options: Array<[string, boolean]> = closer ? [[body.slice(0, closer.index), true], [body.slice(0, closer.index + 1), true], [body, false]] : [[body, false]];
  for (const [piece, closed] of options) {
    if (!text.startsWith(piece, from)) continue;
    const rest = pieces(text, parts, i + 1, from + piece.length, closed);
    if (rest) return [{ part, at, from, piece }, ...rest];
  }
  return null;
}

/** The first code unit of a part read otherwise than in the whole, or null; the parts must be the reply, less what the split adds. */
function misreadIn(text: string, parts: string[]): string | null {
  const found = pieces(text, parts);
  if (!found) return "the parts are not the reply";
  const whole = codeUnits(text);
  for (const { part, at, from, piece } of found) {
    const alone = codeUnits(part);
    for (let k = 0; k < piece.length; k++) {
      if (piece[k] === "\n" || piece[k] === "\r" || alone[at + k] === whole[from + k]) continue;
      const [inWhole, inPart] = whole[from + k] ? ["code", "not code"] : ["not code", "code"];
      return `${JSON.stringify(piece.slice(Math.max(0, k - 20), k + 20))} is ${inWhole} in the reply, ${inPart} in ${JSON.stringify(part)}`;
    }
  }
  return null;
}

const sent = (text: string, units: (code: number) => number) => [...text].reduce((n, c) => n + [...c].reduce((m, _, i) => m + units(c.charCodeAt(i)), 0), 0);

describe("splitMessage reads code fences as the renderers' parser does", () => {
  it("a ```` block with ``` lines in it: closed with ```` and reopened with it, its ``` lines code in every part", () => {
    const inner = Array.from({ length: 12 }, (_, i) => `\`\`\`py\nprint(${i})  # an example of a fenced block\n\`\`\``).join("\n");
    const text = `How to show a fence:\n\n\`\`\`\`markdown\n${inner}\n\`\`\`\`\n\nThat is all.`;
    const parts = splitMessage(text, 200);
    expect(parts.length).toBeGreaterThan(3);
    expect(misreadIn(text, parts)).toBeNull();
    for (const part of parts.slice(1, -1)) expect(part.startsWith("````markdown\n")).toBe(true);
    for (const part of parts.slice(0, -1)) expect(part.endsWith("\n````")).toBe(true);
  });

  it("a long fence: a block cut anywhere is closed and reopened with as many backticks", () => {
    const fence = "`".repeat(8);
    const text = `${fence}text\n${"```js\nlet a = 1;\n```\n".repeat(20)}${fence}\nafter`;
    for (const max of [60, 97, 150]) {
      const parts = splitMessage(text, max);
      expect(misreadIn(text, parts)).toBeNull();
      for (const part of parts) expect(part.length).toBeLessThanOrEqual(max);
      for (const part of parts.slice(1, -1)) expect(part.startsWith(`${fence}text\n`)).toBe(true);
    }
  });

  it("a fence line, or a prose line with ``` in it, is not cut where a half would read as a fence", () => {
    // The opening line is longer than half a part: a cut at its last space would leave "```python title=…" opening an
    // empty block, and the code after it text.
    const opening = `${"Intro ".repeat(10)}\n\`\`\`python title="${"long ".repeat(30)}"\n${"x = 1\n".repeat(40)}\`\`\`\n`;
    // A cut at the space before ```py would open a block in the next part.
    const prose = `${"word ".repeat(36)}then write \`\`\`py and so on, ${"more ".repeat(30)}\nend`;
    for (const text of [opening, prose]) {
      const parts = splitMessage(text, 200);
      expect(parts.length).toBeGreaterThan(1);
      expect(misreadIn(text, parts)).toBeNull();
    }
    expect(splitMessage(opening, 200)[1].startsWith('```python title="long')).toBe(true);
  });

  it("lines the parser takes for no fence (~~~, ```a`b, ```npm ci```, four spaces, a tab) are none to the split either", () => {
    const code = "    ```\n\t```\n~~~\n```a`b\n```npm ci```\n" + "let x = 1;\n".repeat(30);
    const text = `~~~\n\`\`\`ts\n${code}\`\`\`\n~~~\n${"```a`b ".repeat(40)}\nend`;
    const parts = splitMessage(text, 150);
    expect(parts.length).toBeGreaterThan(3);
    expect(misreadIn(text, parts)).toBeNull();
  });

  it("for random replies: every part is code exactly where the whole is, fits, and never needs a block closed for it", () => {
    let seed = 31;
    const next = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    const fences = ["```", "````", "`````", "```py", "````md", "``` js x", "  ```", "   ````", "    ```", "```a`b", "```npm ci```", "~~~", "~~~py", "````  ", "\t```", "``"];
    const words = ["a", "code()", "let x = 1;", "&", "<b>", "😀", "👍🏽", "好", "see", "```", "````py", "``", "~~~", "`x`", "# h", "> q", "- i", "   "];
    for (let round = 0; round < 1500; round++) {
      const lines: string[] = [];
      for (let n = 2 + next(40); n > 0; n--) {
        if (next(3) === 0) lines.push(fences[next(fences.length)]);
        else lines.push(Array.from({ length: 1 + next(next(4) === 0 ? 90 : 12) }, () => words[next(words.length)]).join(next(5) ? " " : ""));
      }
      const text = lines.join("\n") + (next(2) ? "\n" : "");
      const max = 50 + next(300);
      const units = next(2) ? slackSentUnits : () => 1;
      const parts = splitMessage(text, max, units);
      const context = JSON.stringify({ text, max, slack: units === slackSentUnits });
      expect(misreadIn(text, parts), context).toBeNull();
      for (const [i, part] of parts.entries()) {
        expect(sent(part, units), context).toBeLessThanOrEqual(max);
        expect(part, context).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
        // No block a part leaves open but the last's (a draft's, which the split leaves room to close).
        if (i < parts.length - 1) expect(markdownBlocks(part).at(-1), context).not.toMatchObject({ kind: "code", closed: false });
        if (units === slackSentUnits) expect((slackMrkdwn(part) ?? "").length, context).toBeLessThanOrEqual(max);
      }
    }
  });
});
