import { eventLogStore } from "../../stores/event-log";
import { runnerEventRecord } from "../../stores/event-revision";
import { eventReadable } from "../../stores/private-audience";
import { ApiError, denied } from "../errors";
import { type ActionTable, type Handler, cursorSeq, ownConversation } from "./context";

const eventGet: Handler<"event.get"> = async (ctx, p) => {
  const row = await eventLogStore(ctx.db).get(p.event_id);
  if (!row) throw new ApiError("not_found", `event ${p.event_id} not found`);
  if (row.conversationKey !== ctx.snapshot.conversationKey) throw denied("event of another conversation is not readable by this run", { event_id: p.event_id });
  // Only one user of the conversation sees it, and this run answers others (README "Who sees what in a group chat").
  if (!(await eventReadable(ctx.db, row.eventId, ctx.snapshot.privateAudience))) throw denied("event private to another user of this conversation is not readable by this run", { event_id: p.event_id });
  return runnerEventRecord(row);
};

const eventPage: Handler<"event.page"> = async (ctx, p) => {
  ownConversation(ctx, p.conversation_id, "events");
  const bound = { beforeSeq: cursorSeq(ctx, "e", p.before_cursor), afterSeq: cursorSeq(ctx, "e", p.after_cursor) };
  const { rows, hasMore } = await eventLogStore(ctx.db).page(ctx.snapshot.conversationKey, bound, p.limit, ctx.snapshot.privateAudience);
  // A chat message its user recalled or edited reads as they left it (README "A message recalled or edited").
  const items = rows.map(runnerEventRecord);
  // Cursors as history.page gives them: next_cursor goes on the same way, prev_cursor (the first item) the other way.
  return { items, next_cursor: hasMore ? items[items.length - 1]?.cursor : undefined, prev_cursor: items[0]?.cursor, has_more: hasMore };
};

export const eventActions: ActionTable = {
  "event.get": eventGet,
  "event.page": eventPage,
};
