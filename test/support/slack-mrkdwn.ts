/**
 * What in a `text` sent to Slack would not show as meant, or null: `&` only as the three entities Slack decodes,
 * `<` and `>` raw only around a link to an http(s) or mailto URL (`<url>` or `<url|text>`, nothing raw inside it, so
 * never a mention or `<!channel>`), ``` only where a line starts (Slack takes it anywhere for a block's edge), every
 * code block closed and none empty, and some text left to show (Slack refuses a message without).
 */
const LINK = /<(?:https?:\/\/|mailto:)[^\s<>|]+(?:\|[^<>\n]*)?>/gi;

export function slackMrkdwnProblem(text: string): string | null {
  const entity = /&(?!amp;|lt;|gt;)/.exec(text);
  if (entity) return `a raw & at ${entity.index}`;
  const outsideLinks = text.replace(LINK, (link) => " ".repeat(link.length));
  const angle = /[<>]/.exec(outsideLinks);
  if (angle) return `a raw ${angle[0]} at ${angle.index} (not a link's)`;
  const stray = /(?<!^|\n)```/.exec(text);
  if (stray) return `a \`\`\` inside a line at ${stray.index}`;
  let block: string[] | null = null;
  for (const line of text.split("\n")) {
    if (!line.startsWith("```")) {
      block?.push(line);
      continue;
    }
    if (block === null) block = [line.slice(3)];
    else {
      if (!block.join("").trim()) return "an empty code block";
      block = null;
    }
  }
  if (block !== null) return "a code block left open";
  if (!text.trim()) return "no text to show";
  return null;
}
