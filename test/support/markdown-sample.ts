/**
 * An answer as language models write them, with every construct the chat renderers handle (and some they must leave
 * as text), for the Telegram, Lark and Slack renderers' tests: the same input, each platform's own expected output.
 */
export const MARKDOWN_ANSWER = [
  "# Plan for `parse_config`",
  "",
  "Use **bold _and italic_**, *one*, __two__ and ~~old~~; `a < b && c > d` is code.",
  "See [the docs](https://example.com/wiki/Foo_(bar)) or https://example.com/snake_case_path/__init__.py, then:",
  "",
  "1. run `make` in a_b_c",
  "- a **bullet** with a [link](https://x.example/?q=1&r=2)",
  "  * nested & <escaped>",
  "> quoted *text*",
  "> second line",
  "",
  "```python",
  "def f(a, b):",
  '    return a < b and "&" or "**not bold**"',
  "```",
  "",
  "---",
  "Done ~~really~~.",
].join("\n");

/**
 * An answer with what a chat without tables must still show readably: a GFM table (its columns aligned left, right
 * and centred; markup in cells; a pipe escaped and one in a code span, each its cell's; wide characters), numbered
 * and nested lists, and a table in a code block, which stays as written.
 */
export const TABLE_ANSWER = [
  "Prices:",
  "| Fruit | Qty | Note |",
  "|:------|----:|:----:|",
  "| **Apple** | 3 | a \\| b |",
  "| [Pear](https://e.com/p) | 12 | `x|y` |",
  "| 梨 | 7 | 🍐 |",
  "",
  "1. First",
  "   - sub *one*",
  "     - deeper",
  "2. Second",
  "```",
  "| in | code |",
  "|----|------|",
  "```",
].join("\n");

/** A table too wide for a phone's line (45 characters aligned), a `<br>` in a cell. */
export const WIDE_TABLE = ["| Feature | Python | JavaScript |", "|---|---|---|", "| Typing | Dynamic, **strong** | Dynamic, weak |", "| Concurrency | asyncio<br>threads | event loop |"].join("\n");

/** TABLE_ANSWER's table as an aligned monospaced block (Telegram, Slack, Discord): its lines, without the fences. */
export const TABLE_ALIGNED = [
  "Fruit                  │ Qty │ Note",
  "───────────────────────┼─────┼──────",
  "Apple                  │   3 │ a | b",
  "Pear (https://e.com/p) │  12 │  x|y",
  "梨                     │   7 │  🍐",
];

/** TABLE_ANSWER as Slack's mrkdwn shows it. */
export const TABLE_ANSWER_SLACK = ["Prices:", "```", ...TABLE_ALIGNED, "```", "", "1. First", "   ◦ sub _one_", "     ▪ deeper", "2. Second", "```", "| in | code |", "|----|------|", "```"].join("\n");

/** TABLE_ANSWER as Telegram's HTML shows it (a table in a code block is code, as written). */
export const TABLE_ANSWER_TELEGRAM = [
  "Prices:",
  `<pre>${TABLE_ALIGNED.join("\n")}</pre>`,
  "",
  "1. First",
  "   ◦ sub <i>one</i>",
  "     ▪ deeper",
  "2. Second",
  "<pre>| in | code |\n|----|------|</pre>",
].join("\n");

/** TABLE_ANSWER as a Lark card's markdown element shows it: a GFM table, which Lark renders. */
export const TABLE_ANSWER_LARK = [
  "Prices:",
  "",
  "| Fruit | Qty | Note |",
  "| :--- | ---: | :---: |",
  "| **Apple** | 3 | a &#124; b |",
  "| [Pear](https://e.com/p) | 12 | `x\\|y` |",
  "| 梨 | 7 | 🍐 |",
  "",
  "&#49;. First",
  "&nbsp;&nbsp;&nbsp;◦ sub *one*",
  "&nbsp;&nbsp;&nbsp;&nbsp;&nbsp;▪ deeper",
  "&#50;. Second",
  "```",
  "| in | code |",
  "|----|------|",
  "```",
].join("\n");
