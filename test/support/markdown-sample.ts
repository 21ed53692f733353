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
