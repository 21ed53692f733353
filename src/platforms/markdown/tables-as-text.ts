/**
 * An answer's GFM tables rewritten as the Markdown a chat without tables shows (./table-text.ts), the rest of the text
 * as it is: what the delivery splits and sends on Telegram, Slack and Discord, so a part's size is counted on what it
 * shows (an aligned block is wider than its table) and a block cut by a part is closed and reopened as any code block.
 * Tables are found as ./blocks.ts finds them: never in a code block or a quote.
 */
import { openAfter } from "../split-fences";
import { closesFence, fenceOpening, isQuoteLine } from "./blocks";
import { tableMarkdown } from "./table-text";
import { rowCells, tableAt } from "./tables";

export function tablesAsText(markdown: string, columns: number): string {
  if (!markdown.includes("|")) return markdown;
  const lines = markdown.split(/\r?\n/);
  // Where each line starts in the text, so what is not a table is copied as it was (line breaks included).
  const starts: number[] = [];
  for (let i = 0, at = 0; i < lines.length; i++) {
    starts.push(at);
    at += lines[i].length + (markdown[at + lines[i].length] === "\r" ? 2 : 1);
  }
  let out = "";
  let copied = 0;
  for (let i = 0; i < lines.length; ) {
    const fence = fenceOpening(lines[i]);
    if (fence) {
      let j = i + 1;
      while (j < lines.length && !closesFence(lines[j], fence.marker.length)) j++;
      i = j + 1;
      continue;
    }
    if (isQuoteLine(lines[i])) {
      i++;
      continue;
    }
    const table = tableAt(lines, i);
    if (!table) {
      i++;
      continue;
    }
    const last = table.end - 1;
    out += markdown.slice(copied, starts[i]) + tableMarkdown(table.table, columns);
    copied = starts[last] + lines[last].length;
    i = table.end;
  }
  return out + markdown.slice(copied);
}

/**
 * A streamed draft less a last line that may yet be a table's header (its delimiter row not arrived): shown now, it
 * would flash as a line of pipes, then turn into a table at the next edit. Held back until the line after it tells;
 * the final text always shows it. A row of a table above it, or a line in a code block, is shown as it comes.
 */
export function withoutPendingHeader(draft: string): string {
  const end = draft.endsWith("\n") ? draft.length - 1 : draft.length;
  const start = draft.lastIndexOf("\n", end - 1) + 1;
  const line = draft.slice(start, end).replace(/\r$/, "");
  if (!line.includes("|") || !rowCells(line)) return draft;
  const before = draft.slice(0, start);
  const above = before.slice(before.lastIndexOf("\n", before.length - 2) + 1).replace(/\r?\n$/, "");
  if (rowCells(above) || openAfter(before, null) !== null) return draft;
  return before;
}
