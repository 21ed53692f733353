import { dbOf } from "../db/connect";
import type { Env } from "../env";
import { storableText } from "../lib/text";
import { transcriptRevisionStatement } from "../stores/transcript-revision";
import { waitingMessage } from "../stores/waiting-message";
import type { Bot, MessageRevision } from "./types";

/**
 * A recall or an edit (its event `eventId`) reaches the message it names: its transcript item, however old, reads as
 * the user left it (src/stores/transcript-revision.ts), so no later run reads words withdrawn or replaced; and while
 * the message still waits to be answered, whatever agent binds the recall (or none), the conversation's object
 * withdraws it, or gives it its new words, unless a runner has it already (durable-objects/waiting-revisions.ts).
 * Nothing is asked of that object when nothing may be waiting. A failure fails the webhook: the platform sends it
 * again, and doing it again changes nothing more.
 */
export async function reviseMessage(env: Env, bot: Bot, conversationId: string, eventId: string, revision: MessageRevision): Promise<void> {
  const db = dbOf(env);
  // The new words as ingress would have recorded them: NUL and unpaired surrogates replaced, as the runner reads any text.
  const edit = revision.edit && { ...revision.edit, text: revision.edit.text === null ? null : storableText(revision.edit.text) };
  await transcriptRevisionStatement(db, { botId: bot.botId, registeredAt: bot.registeredAt, conversationId, messageRef: revision.id, eventId, edit });
  const waiting = await waitingMessage(db, { botId: bot.botId, source: bot.platform, conversationId, field: revision.field, id: revision.id });
  if (!waiting) return;
  const conversation = env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(waiting.conversationKey));
  await conversation.revise({ eventId: waiting.eventId, runId: waiting.runId, steered: waiting.disposition === "steered", edit });
}
