/**
 * Whether a Lark message addressed the bot (NormalizedEvent.addressed), for an agent that answers in a group only what
 * does (trigger_policy). An app with the permission to read every group message gets the rest of the talk too, which
 * such an agent records and leaves unanswered.
 */

type Mention = { id?: { open_id?: string } };

/**
 * A private chat (`p2p`; a message naming no chat type is taken for one), or a mention of the bot (`ownOpenId`, from
 * bot/v3/info). Without its open_id (that call failed), a mention of anyone is taken for one of it: answered rather
 * than left unanswered. A reply to the bot's message is known only once the message replied to (`parent_id`, the event
 * names no sender) is read at ingress (../replied.ts): false here, it is made true there.
 */
export function addressedOnLark(chatType: string | undefined, mentions: Mention[] = [], ownOpenId: string | null | undefined): boolean {
  if (chatType === undefined || chatType === "p2p") return true;
  return ownOpenId ? mentions.some((m) => m.id?.open_id === ownOpenId) : mentions.length > 0;
}
