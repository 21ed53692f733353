import { describe, expect, it } from "vitest";
import { larkContent } from "../../src/platforms/lark/content";
import { larkMarkdown } from "../../src/platforms/lark/markdown";
import { splitReply } from "../../src/platforms/split";
import { larkMarkdownProblem } from "../support/lark-markdown";
import { hostileTexts } from "../support/hostile-text";
import { MARKDOWN_ANSWER, TABLE_ANSWER, TABLE_ANSWER_LARK, WIDE_TABLE } from "../support/markdown-sample";

/**
 * An answer's Markdown as a Lark card's `markdown` element: what is recognised (the constructs rendered for Telegram),
 * what stays text (escaped as Lark asks, `&#42;`), that mentions never reach Lark, that every output is well-formed
 * for a streamed draft cut anywhere and for each part of a split reply, and what each send and edit carries.
 */
const md = (markdown: string) => larkMarkdown(markdown)?.content ?? null;
const ZWSP = "\u200b";


describe("larkMarkdown: what renders", () => {
  it("a representative answer", () => {
    expect(larkMarkdown(MARKDOWN_ANSWER)).toEqual({
      formatted: true,
      content: [
        "# Plan for `parse_config`",
        "",
        "Use **bold *and italic***, *one*, **two** and ~~old~~; `a < b && c > d` is code.",
        "See [the docs](https://example.com/wiki/Foo_%28bar%29) or [https://example.com/snake&#95;case&#95;path/&#95;&#95;init&#95;&#95;.py](https://example.com/snake_case_path/__init__.py), then:",
        "",
        "&#49;. run `make` in a&#95;b&#95;c",
        "• a **bullet** with a [link](https://x.example/?q=1&r=2)",
        "&nbsp;&nbsp;◦ nested &#38; &#60;escaped&#62;",
        "> quoted *text*",
        "> second line",
        "",
        "```python",
        "def f(a, b):",
        '    return a < b and "&" or "**not bold**"',
        "```",
        "",
        "<hr>",
        "Done ~~really~~.",
      ].join("\n"),
    });
  });

  it("what is not recognised shows as typed: Markdown's characters as entities, a line's start kept text", () => {
    expect(larkMarkdown("2 * 3 = 6, #tag, > , |a|b|, ~5 min, \\*x\\*, :OK: at 12:30, a_b & <b>x</b>")).toEqual({
      formatted: false,
      content: "2 &#42; 3 = 6, #tag, &#62; , &#124;a&#124;b&#124;, &#126;5 min, &#42;x&#42;, &#58;OK: at 12:30, a&#95;b &#38; &#60;b&#62;x&#60;/b&#62;",
    });
    // Lines Lark would take for an ordered list, a list item, a heading, a setext underline or indented code.
    expect(md("2024. A year\n-x\n+1\n#tag\nTitle\n===\n    four spaces\n>")).toBe("&#50;024. A year\n&#45;x\n&#43;1\n&#35;tag\nTitle\n&#61;==\n&nbsp;&nbsp;&nbsp;&nbsp;four spaces\n&#62;");
    // Pipes with no delimiter row under them are no table.
    expect(md("| a | b |\n| 1 | 2 |")).toBe("&#124; a &#124; b &#124;\n&#124; 1 &#124; 2 &#124;");
  });

  it("links only to http(s); an image is a link to it; a bare URL is linked whole", () => {
    expect(md("[a](javascript:alert(1)) [c](tg://user?id=1) [e](HTTP://E.COM) <https://e.com/x_y> <ftp://e.com>")).toBe(
      "&#91;a&#93;(javascript&#58;alert(1)) &#91;c&#93;(tg://user?id=1) [e](HTTP://E.COM) [https://e.com/x&#95;y](https://e.com/x_y) &#60;ftp://e.com&#62;",
    );
    expect(md("![a chart](https://e.com/c.png) [](https://e.com) [`npm ci`](https://docs.npmjs.com) [sp](<https://e.com/a b>)")).toBe(
      "[a chart](https://e.com/c.png) [https://e.com](https://e.com) [npm ci](https://docs.npmjs.com) [sp](https://e.com/a%20b)",
    );
    // A bare URL alone changes nothing Lark would not do itself: the answer may go as a text message.
    expect(larkMarkdown("see https://e.com/a_b")).toEqual({ formatted: false, content: "see [https://e.com/a&#95;b](https://e.com/a_b)" });
  });

  it("code shows as it is, fenced by more backticks than it holds", () => {
    expect(md("`` a`b `` and ` `` ` and `*x* & <y>`")).toBe("``a`b`` and ``` `` ``` and `*x* & <y>`");
    expect(md("````md\n```js\nx\n```\n````")).toBe("````md\n```js\nx\n```\n````");
    expect(md("```c++! and more\nx\n```")).toBe("```\nx\n```");
  });

  it("never lets a mention reach Lark: in text, in a code span, in a code block, in a link's label", () => {
    const mentions = '<at id=all></at> <at user_id="all"></at> < AT ids=ou_1,ou_2>';
    const out = md(`${mentions}\n\`${mentions}\`\n**[${mentions}](https://e.com)**\n\`\`\`\n${mentions}\n\`\`\``)!;
    expect(out).not.toMatch(/<\s*at\b/i);
    expect(out.split("\n")[0]).toBe("&#60;at id=all&#62;&#60;/at&#62; &#60;at user&#95;id=\"all\"&#62;&#60;/at&#62; &#60; AT ids=ou&#95;1,ou&#95;2&#62;");
    // Code reads the same: only a zero-width space was added.
    const inert = mentions.replace(/<(?=\s*at)/gi, `<${ZWSP}`);
    expect(out.split("\n")[1]).toBe(`\`${inert}\``);
    expect(out.split("\n").slice(3, 6).join("\n")).toBe(`\`\`\`\n${inert}\n\`\`\``);
  });

  it("a draft: an open code block shows closed, unpaired markers and an unfinished link as typed", () => {
    expect(md("text\n```ts\nconst a = 1 < 2;")).toBe("text\n```ts\nconst a = 1 < 2;\n```");
    expect(md("**bold but never closed, a `span and [label](https://e.com")).toBe("&#42;&#42;bold but never closed, a &#96;span and &#91;label&#93;([https://e.com](https://e.com)");
    // A block only just opened shows nothing yet; an answer of nothing else renders to nothing (sent as it is).
    expect(md("text\n```ts")).toBe("text\n");
    expect(larkMarkdown("```ts\n")).toBeNull();
  });
});

describe("larkMarkdown: always well-formed", () => {
  it("for every prefix of an answer, as a streamed draft is edited", () => {
    for (let n = 1; n <= MARKDOWN_ANSWER.length; n++) {
      const out = md(MARKDOWN_ANSWER.slice(0, n));
      if (out !== null) expect(larkMarkdownProblem(out), `prefix ${n}: ${out}`).toBeNull();
    }
  });

  it("for hostile input: markers, brackets, tags and line starts in every order", () => {
    const pieces = ["*", "**", "_", "__", "~~", "~", "`", "```", "[", "](", "https://e.com/(", ")", "<", ">", "&", "|", ":OK:", "<at id=all>", "\n", "> ", "# ", "- ", "1. ", "    ", "=", "a", " ", "\\"];
    for (const text of hostileTexts(pieces, 3000, 24)) {
      const out = md(text);
      if (out !== null) expect(larkMarkdownProblem(out), JSON.stringify(text)).toBeNull();
    }
  });

  it("for each part of a split reply: a code block cut across parts renders as code in both", () => {
    const code = Array.from({ length: 500 }, (_, i) => `let v${i} = a < b && **c**;`).join("\n");
    const parts = splitReply(`Intro **bold**\n\`\`\`js\n${code}\n\`\`\`\nafter`, 9000, 20);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) {
      const out = md(part)!;
      expect(larkMarkdownProblem(out)).toBeNull();
      expect(out).toContain("```js\n");
    }
  });
});

describe("larkMarkdown: tables and lists", () => {
  it("a table as GFM, which Lark renders: each cell rendered as a line's text, a pipe in it kept its cell's, a blank line around it; lists keep their numbers and indentation, nested bullets drawn by depth", () => {
    expect(larkMarkdown(TABLE_ANSWER)).toEqual({ formatted: true, content: TABLE_ANSWER_LARK });
    // Lark takes `<br>` in a cell; a row longer than the header adds a column, a shorter one is padded.
    expect(md(WIDE_TABLE)).toBe("| Feature | Python | JavaScript |\n| --- | --- | --- |\n| Typing | Dynamic, **strong** | Dynamic, weak |\n| Concurrency | asyncio<br>threads | event loop |");
    expect(md("> quoted\n| a | b |\n|---|---|\n| 1 | 2 | 3 |\n| <at id=all> |\nafter")).toBe("> quoted\n\n| a | b |  |\n| --- | --- | --- |\n| 1 | 2 | 3 |\n| &#60;at id=all&#62; |  |  |\n\nafter");
  });

  it("past the four tables Lark takes in an element, a table is an aligned monospaced block", () => {
    const table = (n: number) => `| t${n} | x |\n|---|--:|\n| a | ${n} |`;
    const out = md([1, 2, 3, 4, 5].map(table).join("\n\n"))!;
    expect(out.match(/^\| --- \| ---: \|$/gm)).toHaveLength(4);
    expect(out.endsWith("```\nt5 │ x\n───┼──\na  │ 5\n```")).toBe(true);
    expect(larkMarkdownProblem(out)).toBeNull();
  });

  it("every draft of a table well-formed, and each part of a split reply: a table cut across parts has its header in each", () => {
    for (let n = 1; n <= TABLE_ANSWER.length; n++) {
      const out = md(TABLE_ANSWER.slice(0, n));
      if (out !== null) expect(larkMarkdownProblem(out), `prefix ${n}: ${out}`).toBeNull();
    }
    expect(md("| a | b |\n|-")).toBe("| a | b |\n| --- | --- |");
    const rows = Array.from({ length: 600 }, (_, i) => `| item ${i} | ${i * 7} |`).join("\n");
    const parts = splitReply(`Stock:\n| Item | Count |\n|---|--:|\n${rows}\nEnd.`, 9000, 20);
    expect(parts.length).toBeGreaterThan(1);
    for (const [i, part] of parts.entries()) {
      const out = md(part)!;
      expect(larkMarkdownProblem(out)).toBeNull();
      expect(out).toContain(`${i === 0 ? "Stock:\n\n" : ""}| Item | Count |\n| --- | ---: |\n| item `);
    }
  });
});

describe("larkContent: what a send or an edit carries", () => {
  const card = (content: string) => JSON.parse(content);
  const markdownCard = (content: string) => ({ schema: "2.0", config: { update_multi: true }, body: { elements: [{ tag: "markdown", content }] } });
  const plainCard2 = (content: string) => ({ schema: "2.0", config: { update_multi: true }, body: { elements: [{ tag: "div", text: { tag: "plain_text", content } }] } });

  it("markdown: an answer to be edited is a card 2.0 rendering it, whatever it holds; one sent once, only when it renders", () => {
    for (const text of ["**bold**", "just words"]) {
      const edited = larkContent(text, { editable: true, format: "markdown", asIs: false });
      expect({ ...edited, content: card(edited.content) }).toEqual({ msgType: "interactive", rendered: true, content: markdownCard(md(text)!) });
    }
    const once = larkContent("**bold** <at id=all>", { editable: false, format: "markdown", asIs: false });
    expect({ ...once, content: card(once.content) }).toEqual({ msgType: "interactive", rendered: true, content: markdownCard("**bold** &#60;at id=all&#62;") });
    expect(larkContent('just words <at user_id="all">', { editable: false, format: "markdown", asIs: false })).toEqual({
      msgType: "text",
      rendered: false,
      content: JSON.stringify({ text: `just words <${ZWSP}at user_id="all">` }),
    });
  });

  it("refused as rendered (asIs), or too large once escaped: the text as it is, in the same kind of card", () => {
    const asIs = larkContent("**bold**", { editable: true, format: "markdown", asIs: true });
    expect({ ...asIs, content: card(asIs.content) }).toEqual({ msgType: "interactive", rendered: false, content: plainCard2("**bold**") });
    expect(larkContent("**bold**", { editable: false, format: "markdown", asIs: true })).toEqual({ msgType: "text", rendered: false, content: JSON.stringify({ text: "**bold**" }) });
    // 9,000 characters (a reply part's most) that escape to 45,000.
    const stars = `**a** ${"*".repeat(8994)}`;
    expect(card(larkContent(stars, { editable: true, format: "markdown", asIs: false }).content)).toEqual(plainCard2(stars));
  });

  it("plain: as before, a text message or a card 1.0 of plain_text", () => {
    expect(larkContent("**bold** <at id=all>", { editable: false, format: "plain", asIs: false })).toEqual({
      msgType: "text",
      rendered: false,
      content: JSON.stringify({ text: `**bold** <${ZWSP}at id=all>` }),
    });
    expect(card(larkContent("**bold**", { editable: true, format: "plain", asIs: false }).content)).toEqual({
      config: { wide_screen_mode: true, update_multi: true },
      elements: [{ tag: "div", text: { tag: "plain_text", content: "**bold**" } }],
    });
  });
});
