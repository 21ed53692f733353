/** The identity of a conversation: one Durable Object and one transcript per key. */
export interface ConversationRef {
  workspaceId?: string | null;
  botId?: string | null;
  conversationId: string;
  threadId?: string | null;
}

// Components are URI-encoded, so "/" separates them unambiguously and an
// absent component (empty) never collides with a present one.
export function conversationKey(ref: ConversationRef): string {
  const part = (v: string | null | undefined) => (v ? encodeURIComponent(v) : "");
  return [part(ref.workspaceId), part(ref.botId), part(ref.conversationId), part(ref.threadId)].join("/");
}
