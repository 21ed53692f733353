/**
 * The Telegram album (`media_group_id`) a message event is an item of, or null. Telegram sends an album (photos,
 * videos or files sent together) as one update per item (README "album"): ingress announces each item to its
 * conversation before downloading its files, and the conversation gathers the items into one run.
 */
export function albumIdOf(event: { source: string; event_type: string; data: Record<string, unknown> }): string | null {
  const id = event.data.media_group_id;
  return event.source === "telegram" && event.event_type === "message.received" && typeof id === "string" && id !== "" ? id : null;
}
