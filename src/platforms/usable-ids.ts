/**
 * A platform event's conversation and thread ids become keys (its conversation's Durable Object, its records' and
 * transcript's place) and are read back from text columns. One that cannot be (empty, over 200 characters, or holding
 * a NUL, at which a read cuts it short, or half a surrogate pair, which no key can encode) comes from no real chat: the
 * event is recorded as `platform.unhandled` outside any conversation, its payload kept, and nothing runs for it.
 * An empty thread id is no thread (a platform may send "" for an id it has none of, as Lark's samples do a root or parent): the event is the chat's.
 */
import { storedKeyText } from "../protocol/common";
import type { NormalizedEvent } from "./types";
import { unhandledEvent } from "./unhandled";

/** Said in the record's `source_event_type`, after the platform's own name for the event. */
export const UNUSABLE_ID = "unusable_id";

/** As long as an id sent through POST /v1/events may be. */
const UsableIdSchema = storedKeyText(200);

const unusable = (id: string | null) => id !== null && !UsableIdSchema.safeParse(id).success;

export function withUsableIds(given: NormalizedEvent): NormalizedEvent {
  // A conversation's key has always read "" as no thread: the event keeps its place, now named as every other one's.
  const event = given.threadId === "" ? { ...given, threadId: null } : given;
  if (!unusable(event.conversationId) && !unusable(event.threadId)) return event;
  // Its data is JSON, stored whatever its text holds; the rest (a reply target, a revision, files) is the chat's.
  return { ...unhandledEvent(event.key, `${event.sourceEventType}.${UNUSABLE_ID}`, event.eventTime), data: event.data };
}
