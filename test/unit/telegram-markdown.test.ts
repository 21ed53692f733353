import { describe, expect, it } from "vitest";
import { splitReply } from "../../src/platforms/split";
import { telegramHtml } from "../../src/platforms/telegram/markdown";
import { telegramHtmlProblem } from "../support/telegram-html";
import { hostileTexts } from "../support/hostile-text";
import { MARKDOWN_ANSWER, TABLE_ANSWER, TABLE_ANSWER_TELEGRAM, WIDE_TABLE } from "../support/markdown-sample";

/**
 * An answer's Markdown as Telegram HTML: what is recognised, what stays text, and that every output is well-formed,
 * for a streamed draft cut anywhere and for each part of a split reply.
 */
const html = (markdown: string) => telegramHtml(markdown);


describe("telegramHtml: what renders", () => {
  it("a representative answer", () => {
    expect(html(MARKDOWN_ANSWER)).toBe(
      [
        "<b>Plan for <code>parse_config</code></b>",
        "",
        "Use <b>bold <i>and italic</i></b>, <i>one</i>, <b>two</b> and <s>old</s>; <code>a &lt; b &amp;&amp; c &gt; d</code> is code.",
        'See <a href="https://example.com/wiki/Foo_(bar)">the docs</a> or https://example.com/snake_case_path/__init__.py, then:',
        "",
        "1. run <code>make</code> in a_b_c",
        '• a <b>bullet</b> with a <a href="https://x.example/?q=1&amp;r=2">link</a>',
        "  ◦ nested &amp; &lt;escaped&gt;",
        "<blockquote>quoted <i>text</i>\nsecond line</blockquote>",
        "",
        '<pre><code class="language-python">def f(a, b):\n    return a &lt; b and "&amp;" or "**not bold**"</code></pre>',
        "",
        "———",
        "Done <s>really</s>.",
      ].join("\n"),
    );
  });

  it("nested markers, CommonMark's way", () => {
    expect(html("***both*** and **bold *it* bold** and *it **bold** it*")).toBe("<i><b>both</b></i> and <b>bold <i>it</i> bold</b> and <i>it <b>bold</b> it</i>");
    expect(html("*foo**bar**baz*")).toBe("<i>foo<b>bar</b>baz</i>");
    // Telegram is not asked to nest a tag in itself.
    expect(html("**a **b** c**")).toBe("<b>a b c</b>");
    expect(html("# A **bold** title")).toBe("<b>A bold title</b>");
    expect(html("**[a *link*](https://example.com)**")).toBe('<b><a href="https://example.com">a <i>link</i></a></b>');
  });

  it("escapes < & > in text, in code and in a link's href; raw HTML is text", () => {
    expect(html("<b>x</b> & <script>")).toBe("&lt;b&gt;x&lt;/b&gt; &amp; &lt;script&gt;");
    expect(html("`<i>&amp;</i>`")).toBe("<code>&lt;i&gt;&amp;amp;&lt;/i&gt;</code>");
    expect(html("```\n<&>\n```")).toBe("<pre>&lt;&amp;&gt;</pre>");
    expect(html('[q](https://e.com/?a=1&b="2")')).toBe('<a href="https://e.com/?a=1&amp;b=&quot;2&quot;">q</a>');
  });

  it("underscores inside words are text: snake_case, __dunder__ in URLs, file_name_here", () => {
    expect(html("snake_case_name and file_name_here_")).toBe("snake_case_name and file_name_here_");
    expect(html("see https://e.com/__init__.py and www.e.com/*a*")).toBe("see https://e.com/__init__.py and www.e.com/*a*");
    expect(html("_word_ but not in_side_ words")).toBe("<i>word</i> but not in_side_ words");
  });

  it("URLs with parentheses: balanced ones belong to the URL, a sentence's closing one does not", () => {
    expect(html("[w](https://en.wikipedia.org/wiki/Rust_(programming_language))")).toBe('<a href="https://en.wikipedia.org/wiki/Rust_(programming_language)">w</a>');
    expect(html("(see https://e.com/a_(b)_c).")).toBe("(see https://e.com/a_(b)_c).");
    expect(html("[x](https://e.com/a(b)")).toBe("[x](https://e.com/a(b)");
  });

  it("links only to http(s), tg and mailto; anything else stays as written", () => {
    expect(html("[a](javascript:alert(1)) [b](./rel_path_) [c](tg://user?id=1) [d](mailto:a@b.c) [e](HTTP://E.COM)")).toBe(
      '[a](javascript:alert(1)) [b](./rel_path_) <a href="tg://user?id=1">c</a> <a href="mailto:a@b.c">d</a> <a href="HTTP://E.COM">e</a>',
    );
    expect(html("<https://e.com/x_y_z> and <ftp://e.com>")).toBe('<a href="https://e.com/x_y_z">https://e.com/x_y_z</a> and &lt;ftp://e.com&gt;');
    expect(html("![a chart](https://e.com/c.png) and [](https://e.com)")).toBe('<a href="https://e.com/c.png">a chart</a> and <a href="https://e.com">https://e.com</a>');
    // Telegram nests no code in a link: its text stays.
    expect(html("[`npm ci`](https://docs.npmjs.com)")).toBe('<a href="https://docs.npmjs.com">npm ci</a>');
  });

  it("unterminated markers stay text; an unterminated code block runs to the end", () => {
    expect(html("**bold but never closed")).toBe("**bold but never closed");
    expect(html("a `code span never closed")).toBe("a `code span never closed");
    expect(html("~~half and *half")).toBe("~~half and *half");
    expect(html("[label](https://e.com")).toBe("[label](https://e.com");
    expect(html("text\n```ts\nconst a = 1 < 2;")).toBe('text\n<pre><code class="language-ts">const a = 1 &lt; 2;</code></pre>');
    // A block only just opened shows nothing yet; an answer of nothing else renders to nothing (sent as it is).
    expect(html("text\n```ts")).toBe("text\n");
    expect(html("```ts\n")).toBeNull();
  });

  it("what is not recognised is text: a lone star, a hashtag, a bare >, a table, a single tilde", () => {
    expect(html("2 * 3 = 6, #tag, #, > , |a|b|, ~5 min, \\*x\\*")).toBe("2 * 3 = 6, #tag, #, &gt; , |a|b|, ~5 min, *x*");
    expect(html(">")).toBe("&gt;");
  });
});

describe("telegramHtml: always well-formed", () => {
  it("for every prefix of an answer, as a streamed draft is edited", () => {
    for (let n = 1; n <= MARKDOWN_ANSWER.length; n++) {
      const out = html(MARKDOWN_ANSWER.slice(0, n));
      if (out !== null) expect(telegramHtmlProblem(out), `prefix ${n}: ${out}`).toBeNull();
    }
  });

  it("for hostile input: markers, brackets and tags in every order", () => {
    const pieces = ["*", "**", "_", "__", "~~", "`", "```", "[", "](", "https://e.com/(", ")", "<", ">", "&", "\n", "> ", "# ", "- ", "a", " ", "\\"];
    for (const text of hostileTexts(pieces, 2000, 24)) {
      const out = html(text);
      if (out !== null) expect(telegramHtmlProblem(out), JSON.stringify(text)).toBeNull();
    }
  });

  it("for each part of a split reply: a code block cut across parts renders as code in both", () => {
    const code = Array.from({ length: 200 }, (_, i) => `let v${i} = a < b && **c**;`).join("\n");
    const parts = splitReply(`Intro **bold**\n\`\`\`js\n${code}\n\`\`\`\nafter`, 4096, 20);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) {
      const out = html(part)!;
      expect(telegramHtmlProblem(out)).toBeNull();
      expect(out).toContain('<pre><code class="language-js">');
      // Telegram counts the text after its entities are parsed: never more than the Markdown it came from.
      expect(out.replace(/<[^>]*>/g, "").replace(/&(lt|gt|amp|quot);/g, "x").length).toBeLessThanOrEqual(part.length);
    }
  });
});

describe("telegramHtml: tables and lists", () => {
  it("a table as an aligned monospaced block: each column aligned as its delimiter says, a cell's text as it shows (a link's URL beside it), pipes kept in their cells, wide characters two columns; lists keep their numbers and indentation, nested bullets drawn by depth", () => {
    expect(html(TABLE_ANSWER)).toBe(TABLE_ANSWER_TELEGRAM);
  });

  it("a table wider than a phone's line as a record per row, each cell's Markdown rendered, a <br> a line break", () => {
    expect(html(WIDE_TABLE)).toBe(
      "<b>Feature:</b> Typing\n<b>Python:</b> Dynamic, <b>strong</b>\n<b>JavaScript:</b> Dynamic, weak\n\n<b>Feature:</b> Concurrency\n<b>Python:</b> asyncio\nthreads\n<b>JavaScript:</b> event loop",
    );
  });

  it("loses nothing: a row longer than the header adds a column, a shorter one is padded; a quote's table stays as written", () => {
    expect(html("| a | b |\n|---|---|\n| 1 | 2 | 3 |\n| 4 |")).toBe("<pre>a │ b │\n──┼───┼──\n1 │ 2 │ 3\n4 │   │</pre>");
    expect(html("> | a | b |\n> |---|---|")).toBe("<blockquote>| a | b |\n|---|---|</blockquote>");
  });

  it("a table still streaming shows as one from its delimiter row's first dash, every draft well-formed", () => {
    expect(html("| a | b |\n|-")).toBe("<pre>a │ b\n──┼──</pre>");
    expect(html("| a | b |\n|---|---|\n| 1 | 2")).toBe("<pre>a │ b\n──┼──\n1 │ 2</pre>");
    for (let n = 1; n <= TABLE_ANSWER.length; n++) {
      const out = html(TABLE_ANSWER.slice(0, n));
      if (out !== null) expect(telegramHtmlProblem(out), `prefix ${n}: ${out}`).toBeNull();
    }
  });

  it("takes linear time on lines made to be slow: a heading's trailing spaces, a URL ending in parentheses, closing markers without openers", () => {
    const took = (run: () => void) => ((t) => (run(), performance.now() - t))(performance.now());
    // Each at sizes where the quadratic cost shows over the linear one (a marker's scan back is cheap, so longer).
    const cases: Array<[(n: number) => string, number]> = [
      [(n) => `# a${" ".repeat(n)}b`, 1_000],
      [(n) => `https://e.com/${")".repeat(n)}`, 1_000],
      [(n) => "a* ".repeat(n / 3), 3_000],
    ];
    for (const [make, size] of cases) {
      const [small, large] = [make(size), make(16 * size)];
      html(small);
      // One text 16 times as long against 16 of the short one: about as long when linear, 16 times when quadratic. The
      // best of a few tries, as another process may take the machine for a while.
      let ratio = Infinity;
      for (let tries = 0; tries < 5 && ratio >= 6; tries++) ratio = Math.min(ratio, took(() => html(large)) / took(() => [...Array(16)].forEach(() => html(small))));
      expect(ratio, large.slice(0, 20)).toBeLessThan(6);
    }
  }, 60_000);
});
