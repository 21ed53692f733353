import { ftsMatchExpression } from "../../stores/fts-query";
import { toTranscriptItem } from "../../stores/transcript";
import { transcriptSearchStore } from "../../stores/transcript-search";
import { type ActionTable, type Handler, ownConversation } from "./context";

/**
 * history.search (PROTOCOL §8): full-text search over the run's own
 * conversation, best matches first. The query is plain text; it can never be
 * an FTS or SQL syntax error.
 */
const historySearch: Handler<"history.search"> = async (ctx, p) => {
  ownConversation(ctx, p.filters?.conversation_id, "history");
  const match = ftsMatchExpression(p.query);
  if (!match) return { items: [], total_count: 0, query: p.query };
  const { hits, total } = await transcriptSearchStore(ctx.db).search(ctx.snapshot.conversationKey, {
    match,
    roles: p.filters?.roles ?? undefined,
    eventTypes: p.filters?.event_types ?? undefined,
    limit: p.top_k,
    audience: ctx.snapshot.privateAudience,
  });
  return { items: hits.map((h) => ({ ...toTranscriptItem(h.row), score: h.score })), total_count: total, query: p.query };
};

export const searchActions: ActionTable = {
  "history.search": historySearch,
};
