import { toTranscriptItem, transcriptStore } from "../../stores/transcript";
import { type ActionTable, type Handler, historyBounds, ownConversation } from "./context";

const historyPage: Handler<"history.page"> = async (ctx, p) => {
  ownConversation(ctx, p.conversation_id, "history");
  const { rows, hasMore } = await transcriptStore(ctx.db).page(ctx.snapshot.conversationKey, {
    direction: p.direction,
    beforeSeq: historyBounds(ctx, p.before_cursor)?.before,
    afterSeq: historyBounds(ctx, p.after_cursor)?.after,
    limit: p.limit,
    artifactItems: p.include_artifacts ?? false,
    audience: ctx.snapshot.privateAudience,
  });
  const items = rows.map((r) => toTranscriptItem(r, p.include_artifacts ?? false));
  return {
    items,
    next_cursor: hasMore ? items[items.length - 1]?.cursor : undefined,
    prev_cursor: items[0]?.cursor,
    has_more: hasMore,
  };
};

export const historyActions: ActionTable = {
  "history.page": historyPage,
};
