import type { Message } from "../protocol/common";
import type { KnownResult } from "../protocol/results";
import type { LedgerEntry } from "../stores/runs";

/**
 * The ids a run's runner gave its inline artifacts (`artifact.created {artifact_id, content_base64}`), to the ids the
 * host stored them under: its messages name them by its own, and are rewritten to name them as stored.
 */
export class InlineArtifactIds {
  private readonly byRunnerId = new Map<string, string>();

  set(runnerId: string, storedId: string): void {
    this.byRunnerId.set(runnerId, storedId);
  }

  /**
   * A message naming one of the run's inline artifacts by the id its runner gave it names the artifact as stored, in
   * the transcript, the run's message and the ledger delivery reads.
   */
  rename(result: KnownResult, recorded: LedgerEntry) {
    const field = result.type === "message.delta" ? "chunk" : result.type === "message.completed" || result.type === "run.completed" ? "message" : null;
    const message = field ? (result.data as Record<string, Message | null | undefined>)[field] : null;
    if (!field || !message || this.byRunnerId.size === 0) return;
    const content = this.storedIdsIn(message.content);
    if (content === message.content) return;
    message.content = content;
    const sent = (recorded.data as Record<string, Record<string, unknown>>)[field];
    recorded.data = { ...(recorded.data as Record<string, unknown>), [field]: { ...sent, content: this.storedIdsIn(sent.content) } };
  }

  /** Content elements with the runner's ids of inline artifacts replaced by the stored ids; the same array when none is named. */
  private storedIdsIn<T>(content: T): T {
    if (!Array.isArray(content)) return content;
    const stored = (el: unknown) => (el !== null && typeof el === "object" && typeof (el as { artifact_id?: unknown }).artifact_id === "string" ? this.byRunnerId.get((el as { artifact_id: string }).artifact_id) : undefined);
    return content.some((el) => stored(el) !== undefined) ? (content.map((el) => (stored(el) ? { ...el, artifact_id: stored(el) } : el)) as T) : content;
  }
}
