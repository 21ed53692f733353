/**
 * The messages a reply's text is shown in on its platform: split at the platform's size (../platforms/split.ts), and
 * first, where the host renders Markdown on a platform that has no tables, its tables turned into what it shows of them
 * (an aligned block, or a record per row), so the split counts what is sent and cuts such a block as any code block.
 * A streamed draft (`draft`) holds back a last line that may turn out a table's header.
 */
import type { Config } from "../env";
import { tablesAsText, withoutPendingHeader } from "../platforms/markdown/tables-as-text";
import { splitReply } from "../platforms/split";
import type { Messenger, PlatformAdapter, TextFormat } from "../platforms/types";

export function replyParts(text: string, adapter: PlatformAdapter, config: Config, format: TextFormat, draft = false, maxParts = config.DELIVERY_MAX_PARTS): string[] {
  const { maxMessageSize, sentUnits, tableColumns } = adapter.surface;
  // A draft's last line that may be a table's header waits for the line that tells (no flash of pipes).
  const markdown = format === "markdown" && draft ? withoutPendingHeader(text) : text;
  const shown = format === "markdown" && tableColumns !== undefined ? tablesAsText(markdown, tableColumns) : markdown;
  return splitReply(shown, maxMessageSize, Math.min(maxParts, config.DELIVERY_MAX_PARTS), sentUnits);
}

/**
 * How many parts a reply's final text may take when its messenger may post only so many more (Messenger.postsLeft):
 * those of its messages already shown, and those; past them the last says the rest was cut (splitReply), rather than
 * the platform refusing the rest unsaid.
 */
export function partsRoom(messenger: Messenger, shown: number, config: Config): number {
  const left = messenger.postsLeft?.();
  return left === undefined ? config.DELIVERY_MAX_PARTS : Math.max(1, shown + left);
}
