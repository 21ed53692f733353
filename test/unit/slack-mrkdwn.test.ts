import { describe, expect, it } from "vitest";
import { slackMrkdwn, slackText } from "../../src/platforms/slack/mrkdwn";
import { escapeSlackText, slackSentUnits } from "../../src/platforms/slack/text";
import { splitReply } from "../../src/platforms/split";
import { slackMrkdwnProblem } from "../support/slack-mrkdwn";
import { hostileTexts } from "../support/hostile-text";
import { MARKDOWN_ANSWER, TABLE_ANSWER, TABLE_ANSWER_SLACK, WIDE_TABLE } from "../support/markdown-sample";

/**
 * An answer's Markdown as Slack mrkdwn: what is recognised, what stays text, and that every output is well-formed and
 * no longer than the reply's split allowed, for a streamed draft cut anywhere and for each part of a split reply.
 */
const mrkdwn = (markdown: string) => slackMrkdwn(markdown);
/** What the text takes of Slack's 4,000 as the split measures it: escaped. */
const asSent = (text: string) => escapeSlackText(text).length;


describe("slackMrkdwn: what renders", () => {
  it("a representative answer", () => {
    expect(mrkdwn(MARKDOWN_ANSWER)).toBe(
      [
        "*Plan for `parse_config`*",
        "",
        "Use *bold _and italic_*, _one_, *two* and ~old~; `a &lt; b &amp;&amp; c &gt; d` is code.",
        "See <https://example.com/wiki/Foo_(bar)|the docs> or https://example.com/snake_case_path/__init__.py, then:",
        "",
        "1. run `make` in a_b_c",
        "• a *bullet* with a <https://x.example/?q=1&amp;r=2|link>",
        "  ◦ nested &amp; &lt;escaped&gt;",
        "&gt; quoted _text_",
        "&gt; second line",
        "",
        "```",
        "def f(a, b):",
        '    return a &lt; b and "&amp;" or "**not bold**"',
        "```",
        "",
        "———",
        "Done ~really~.",
      ].join("\n"),
    );
  });

  it("emphasis as Slack's markers, nested, never one inside itself; next to a letter or digit it stays as written", () => {
    expect(mrkdwn("***both*** and **bold *it* bold** and *it **bold** it*")).toBe("_*both*_ and *bold _it_ bold* and _it *bold* it_");
    expect(mrkdwn("**a **b** c** and # not a heading")).toBe("*a b c* and # not a heading");
    expect(mrkdwn("# A **bold** title #")).toBe("*A bold title*");
    expect(mrkdwn("**[a *link*](https://example.com)**")).toBe("*<https://example.com|a _link_>*");
    // Slack formats nothing inside a word, so CommonMark's intraword emphasis keeps its markers: 2*3*4 is not 2_3_4.
    expect(mrkdwn("2*3*4, **foo**bar, snake_case_name and in_side_ words")).toBe("2*3*4, **foo**bar, snake_case_name and in_side_ words");
  });

  it("escapes & < > everywhere but a link's own < and >: an answer can never ping <!channel> or mention anyone", () => {
    expect(mrkdwn("<!channel> <@U123> <#C1|x> & <b>x</b>")).toBe("&lt;!channel&gt; &lt;@U123&gt; &lt;#C1|x&gt; &amp; &lt;b&gt;x&lt;/b&gt;");
    expect(mrkdwn("`<!here>`, [<!here>](https://e.com/?a=1&b=2) and [x](https://e.com/<!here>)")).toBe(
      "`&lt;!here&gt;`, <https://e.com/?a=1&amp;b=2|&lt;!here&gt;> and [x](https://e.com/&lt;!here&gt;)",
    );
    expect(mrkdwn("```\n<!channel> & co\n```")).toBe("```\n&lt;!channel&gt; &amp; co\n```");
  });

  it("links only to http(s) and mailto URLs Slack can hold; anything else stays as written", () => {
    expect(mrkdwn("[a](javascript:alert(1)) [b](./rel_path_) [c](tg://user?id=1) [d](mailto:a@b.c) [e](HTTP://E.COM)")).toBe(
      "[a](javascript:alert(1)) [b](./rel_path_) [c](tg://user?id=1) <mailto:a@b.c|d> <HTTP://E.COM|e>",
    );
    expect(mrkdwn("<https://e.com/x_y_z> and <ftp://e.com>")).toBe("<https://e.com/x_y_z> and &lt;ftp://e.com&gt;");
    expect(mrkdwn("![a chart](https://e.com/c.png) and [](https://e.com) and [`npm ci`](https://docs.npmjs.com)")).toBe(
      "<https://e.com/c.png|a chart> and <https://e.com> and <https://docs.npmjs.com|npm ci>",
    );
    // A `|` would end Slack's URL early; a destination's spaces would go out longer than written (as %20).
    expect(mrkdwn("[x](https://e.com/a|b) [y](<https://e.com/a b c d e f>)")).toBe("[x](https://e.com/a|b) [y](&lt;https://e.com/a b c d e f&gt;)");
  });

  it("code: spans as written, blocks without their language, a one-line block as a span, ``` anywhere else defused", () => {
    expect(mrkdwn("a `x` b ``y`` c ``z`w`` d")).toBe("a `x` b `y` c ``z`w`` d");
    expect(mrkdwn("```ts\nconst a = 1;\n```\n```shell session\n$ ls\n```")).toBe("```\nconst a = 1;\n```\n```shell session\n$ ls\n```");
    expect(mrkdwn("  ```\n  indented\n    more\n  ```")).toBe("```\nindented\n  more\n```");
    expect(mrkdwn("Run ```npm ci``` then:\n```npm ci```")).toBe("Run `npm ci` then:\n`npm ci`");
    // Slack would take a stray ``` for a block's edge, and run that block to the next fence.
    expect(mrkdwn("use ``` to fence, \\`\\`\\` too\n```\nq = '```'\n```")).toBe("use ˋˋˋ to fence, ˋˋˋ too\n```\nq = 'ˋˋˋ'\n```");
  });

  it("unterminated markers stay text; a code block still open is closed; one only just opened shows nothing", () => {
    expect(mrkdwn("**bold but never closed")).toBe("**bold but never closed");
    expect(mrkdwn("a `code span never closed")).toBe("a `code span never closed");
    expect(mrkdwn("~~half and *half")).toBe("~~half and *half");
    expect(mrkdwn("[label](https://e.com")).toBe("[label](https://e.com");
    expect(mrkdwn("text\n```ts\nconst a = 1 < 2;")).toBe("text\n```\nconst a = 1 &lt; 2;\n```");
    expect(mrkdwn("text\n```ts\nconst a = 1;\n")).toBe("text\n```\nconst a = 1;\n```");
    expect(mrkdwn("text\n```ts")).toBe("text\n");
    expect(mrkdwn("```ts\n")).toBeNull();
  });
});

describe("slackMrkdwn: always well-formed, never longer than the split allowed", () => {
  it("for every prefix of an answer, as a streamed draft is edited", () => {
    for (let n = 1; n <= MARKDOWN_ANSWER.length; n++) {
      const draft = MARKDOWN_ANSWER.slice(0, n);
      const out = mrkdwn(draft);
      if (out === null) continue;
      expect(slackMrkdwnProblem(out), `prefix ${n}: ${out}`).toBeNull();
      // Only a code block closed adds anything: its closing line.
      expect(out.length, `prefix ${n}`).toBeLessThanOrEqual(asSent(draft) + 4);
    }
  });

  it("for hostile input: markers, brackets, fences and mentions in every order", () => {
    const pieces = ["*", "**", "_", "__", "~~", "`", "```", "```js", "[", "](", "https://e.com/(", ")", "<", ">", "&", "\n", "> ", "# ", "- ", "a", " ", "\\", "|", "<!channel>", "mailto:a@b"];
    for (const text of hostileTexts(pieces, 3000, 30)) {
      const out = mrkdwn(text);
      if (out !== null) expect(slackMrkdwnProblem(out), JSON.stringify(text)).toBeNull();
    }
  });

  it("for each part of a split reply: a code block cut across parts is code in each, and no part outgrows 4000", () => {
    const code = Array.from({ length: 200 }, (_, i) => `let v${i} = a < b && **c**;`).join("\n");
    const parts = splitReply(`Intro **bold**\n\`\`\`js\n${code}\n\`\`\`\nafter`, 4000, 20, slackSentUnits);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) {
      const out = mrkdwn(part)!;
      expect(slackMrkdwnProblem(out)).toBeNull();
      expect(out).toMatch(/^```\nlet v|\n```\nlet v/);
      expect(out.length).toBeLessThanOrEqual(4000);
    }
  });

  it("for a streamed draft whose last part is still inside a code block: the split leaves room for its closing line", () => {
    for (const unit of ["a", "&", "<"]) {
      for (let size = 3980; size <= 4010; size++) {
        const draft = `\`\`\`\n${unit.repeat(Math.ceil(size / asSent(unit)))}`;
        for (const ending of ["", "\n"]) {
          for (const part of splitReply(draft + ending, 4000, 20, slackSentUnits)) {
            const out = mrkdwn(part) ?? escapeSlackText(part);
            expect(slackMrkdwnProblem(out)).toBeNull();
            expect(out.length, `${unit} × ${size}${JSON.stringify(ending)}`).toBeLessThanOrEqual(4000);
          }
        }
      }
    }
  });

  it("a ```` block cut across parts, ``` lines in it, is closed with ```` in each: every part goes as mrkdwn, code in each", () => {
    const parts = splitReply(`\`\`\`\`\n${"ab ".repeat(1500)}\n\`\`\`py\nx\n\`\`\`\n${"ab ".repeat(1500)}\n\`\`\`\``, 4000, 20, slackSentUnits);
    expect(parts.length).toBeGreaterThan(2);
    for (const part of parts.slice(0, -1)) expect(part.endsWith("\n````")).toBe(true);
    for (const part of parts) {
      const sent = slackText(part, "markdown");
      expect(sent).toBe(slackMrkdwn(part));
      expect(sent).toMatch(/^```\nab ab/);
      expect(slackMrkdwnProblem(sent)).toBeNull();
      expect(sent.length).toBeLessThanOrEqual(4000);
    }
  });
});

describe("slackMrkdwn: tables and lists", () => {
  it("a table as an aligned code block (Slack has no tables), its cells' text escaped; lists keep their numbers and indentation, nested bullets drawn by depth", () => {
    expect(mrkdwn(TABLE_ANSWER)).toBe(TABLE_ANSWER_SLACK);
    // Wider than a phone's, narrower than a thread's pane: aligned, a <br> another line of its row.
    expect(mrkdwn(WIDE_TABLE)).toBe(
      "```\nFeature     │ Python          │ JavaScript\n────────────┼─────────────────┼──────────────\nTyping      │ Dynamic, strong │ Dynamic, weak\nConcurrency │ asyncio         │ event loop\n            │ threads         │\n```",
    );
    // Escaped as any text; a ``` that is no code span's is the look-alike, lest it end the block.
    expect(mrkdwn("| a | b |\n|---|---|\n| <!channel> & `x` | ``` y |")).toBe(`\`\`\`\na${" ".repeat(13)} │ b\n${"─".repeat(14)}─┼─${"─".repeat(5)}\n&lt;!channel&gt; &amp; x │ ˋˋˋ y\n\`\`\``);
  });

  it("a table wider than a thread's pane as a record per row, each cell's Markdown as mrkdwn", () => {
    const wide = `| Name | Role | Notes |\n|---|---|---|\n| Ada | **Engineer** | ${"long ".repeat(10).trim()} |\n| Bob | _Ops_ | short |`;
    expect(mrkdwn(wide)).toBe(`*Name:* Ada\n*Role:* *Engineer*\n*Notes:* ${"long ".repeat(10).trim()}\n\n*Name:* Bob\n*Role:* _Ops_\n*Notes:* short`);
  });

  it("every draft of a table well-formed, its block closed: a table shows as one from its delimiter row's first dash", () => {
    expect(mrkdwn("| a | b |\n|-")).toBe("```\na │ b\n──┼──\n```");
    for (let n = 1; n <= TABLE_ANSWER.length; n++) {
      const out = mrkdwn(TABLE_ANSWER.slice(0, n));
      if (out !== null) expect(slackMrkdwnProblem(out), `prefix ${n}: ${out}`).toBeNull();
    }
  });
});
