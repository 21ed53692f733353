/** Who sent a Telegram message (a user, or a chat speaking as itself) and the actor the host records for them. */
import * as z from "zod";

export const UserSchema = z.looseObject({
  id: z.number(),
  is_bot: z.boolean().optional(),
  first_name: z.string().optional(),
  last_name: z.string().optional(),
  username: z.string().optional(),
});
type TelegramUser = z.infer<typeof UserSchema>;

export const actorOf = (user: TelegramUser | undefined) =>
  user
    ? {
        actor_type: user.is_bot ? "bot" : "user",
        actor_id: String(user.id),
        actor_name: [user.first_name, user.last_name].filter(Boolean).join(" ") || user.username || null,
        metadata: user.username ? { username: user.username } : {},
      }
    : null;

export const SenderChatSchema = z.looseObject({ id: z.number(), type: z.string().optional(), title: z.string().optional(), username: z.string().optional() });

/**
 * A chat speaking as itself (an anonymous group admin, a linked channel's post): the actor is that chat, not
 * Telegram's placeholder bot, whose one id every anonymous admin of every group shares (actor-scoped state
 * would be shared across groups).
 */
export const chatActorOf = (chat: z.infer<typeof SenderChatSchema>) => ({
  actor_type: "chat",
  actor_id: String(chat.id),
  actor_name: chat.title ?? chat.username ?? null,
  metadata: { chat_type: chat.type ?? null, ...(chat.username ? { username: chat.username } : {}) },
});
