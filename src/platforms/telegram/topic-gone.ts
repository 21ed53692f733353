/**
 * A forum topic that no longer takes the answer of a run that went on meanwhile: deleted (Telegram answers 400
 * "message thread not found", or TOPIC_DELETED; topics turned off in the group read the same) or closed by an admin
 * (TOPIC_CLOSED, to a bot that may not manage topics). The chat itself still takes it: the answer goes on there (its
 * General topic), unquoted (a reply to the message would go back to its topic), after a line saying why, posted once.
 * A chat that refuses too (its General topic closed) refuses the rest of the reply, as a chat that refuses the bot
 * does (placeGone): nowhere nearer is left.
 */
import type { ApiFailure } from "../types";

const DELETED = /message thread not found|TOPIC_DELETED/i;
const CLOSED = /TOPIC_CLOSED/i;

/** The line posted in the chat before the first message the topic refused. */
export const TOPIC_NOTES = {
  deleted: "(The topic this answers no longer exists: the answer is here instead.)",
  closed: "(The topic this answers is closed: the answer is here instead.)",
} as const;
export type TopicRefusal = keyof typeof TOPIC_NOTES;

/** Why Telegram refused a post for its topic, if it did. */
export function topicRefusal(failure: ApiFailure): TopicRefusal | null {
  if (failure.status !== 400) return null;
  return DELETED.test(failure.message) ? "deleted" : CLOSED.test(failure.message) ? "closed" : null;
}

/**
 * A refusal that no later call of the reply would escape: the bot removed from the chat or blocked by its user (403),
 * the chat gone ("chat not found"), or its General topic closed (`inGeneral`: the reply is there, or left its topic).
 */
export function chatRefusal(failure: ApiFailure, inGeneral: boolean): ApiFailure {
  const gone = failure.status === 403 || (failure.status === 400 && /chat not found/i.test(failure.message)) || (inGeneral && topicRefusal(failure) !== null);
  return gone ? { ...failure, placeGone: true } : failure;
}
