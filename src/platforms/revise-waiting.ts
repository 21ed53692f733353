import { dbOf } from "../db/connect";
import type { Env } from "../env";
import { storableText } from "../lib/text";
import { waitingMessage } from "../stores/waiting-message";
import type { Bot, MessageRevision } from "./types";

/**
 * A recall or an edit reaches the message it names while that message still waits to be answered, whatever agent
 * binds the recall (or none): the conversation's object withdraws it, or gives it its new words, unless a runner has
 * it already (durable-objects/waiting-revisions.ts). Nothing is asked of that object when nothing may be waiting.
 * A failure fails the webhook: the platform sends it again, and doing it again changes nothing more.
 */
export async function reviseWaiting(env: Env, bot: Bot, conversationId: string, revision: MessageRevision): Promise<void> {
  const waiting = await waitingMessage(dbOf(env), { botId: bot.botId, source: bot.platform, conversationId, field: revision.field, id: revision.id });
  if (!waiting) return;
  const conversation = env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(waiting.conversationKey));
  // The new words as ingress would have recorded them: NUL and unpaired surrogates replaced, as the runner reads any text.
  const edit = revision.edit && { ...revision.edit, text: revision.edit.text === null ? null : storableText(revision.edit.text) };
  await conversation.revise({ eventId: waiting.eventId, runId: waiting.runId, steered: waiting.disposition === "steered", edit });
}
