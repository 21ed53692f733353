import { configOf, type Env } from "../env";
import type { CanonicalEvent } from "../ingress/accept";
import { loggedError } from "../lib/describe-error";
import { loggedId } from "../lib/log-text";
import { conversationKey } from "../stores/conversation-key";
import { albumIdOf } from "./telegram/album";

/**
 * An album's item is announced to its conversation's object before its files are downloaded (up to 20 MB each, which
 * may take longer than ALBUM_WAIT_MS): the album's run then waits for it, not only for the items that arrived
 * (durable-objects/album-gathering.ts). Answers what to call once the item's ingress ends, however it ends: an item
 * refused or unbound must hold the run no longer. Best effort both ways: an announcement lost only costs what it would
 * have won (an item arriving after its album's run began runs on its own), and a withdrawal lost ends with its hold.
 */
export async function announceAlbumItem(env: Env, ev: CanonicalEvent, files: number): Promise<() => Promise<void>> {
  const albumId = albumIdOf(ev);
  const eventId = ev.event_id;
  if (albumId === null || eventId === undefined || configOf(env).ALBUM_WAIT_MS === 0) return async () => {};
  const key = conversationKey({ workspaceId: ev.workspace_id, botId: ev.bot_id, conversationId: ev.conversation_id, threadId: ev.thread_id });
  const conversation = env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(key));
  const told = (what: string) => (err: unknown) => console.error(`album item ${loggedId(eventId)}: ${what}: ${loggedError(err)}`);
  await conversation.albumItem(eventId, { albumId, files }).catch(told("not announced"));
  return () => conversation.albumItem(eventId, null).catch(told("not withdrawn"));
}
