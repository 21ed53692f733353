/**
 * One Lark message read by id: `GET /open-apis/im/v1/messages/{message_id}`. Its `data.items` holds the message, and
 * for a merge_forward the messages in it after it (each naming the forward that holds it in `upper_message_id`; a
 * forward inside it holds its own). The app needs the permission to read the chat's messages (in a group, Feishu's
 * "read all messages in groups", im:message.group_msg).
 */
import * as z from "zod";
import { pathSegment } from "../../lib/url";
import type { ApiResult, Bot } from "../types";
import { withoutNulls } from "../payload";
import { larkApi, type LarkCredentials } from "./api";

/** A message as the API gives it (not as an event does: `msg_type`, `body.content`, a mention's `id` a string). */
export const LarkMessageSchema = z.looseObject({
  message_id: z.string(),
  msg_type: z.string(),
  /** Milliseconds since the epoch, as a string: a forward's messages are put in the order they were sent by it. */
  create_time: z.string().optional(),
  /** Recalled: its content is only Lark's notice of that. */
  deleted: z.boolean().optional(),
  upper_message_id: z.string().optional(),
  /** `id` is an open_id for a user, an app_id for an app (`sender_type: app`). */
  sender: z.looseObject({ id: z.string().optional(), id_type: z.string().optional(), sender_type: z.string().optional() }).optional(),
  body: z.looseObject({ content: z.string().optional() }).optional(),
  mentions: z.array(z.looseObject({ key: z.string(), id: z.string().optional(), name: z.string().optional() })).optional(),
});
export type LarkMessage = z.infer<typeof LarkMessageSchema>;

/**
 * The message (first) and, for a merge_forward, the messages in it; a failure as Lark's calls fail. `timeoutMs` bounds
 * the read and the tenant token it may have to fetch first together: a webhook's reads share Lark's 3 s.
 */
export async function getLarkMessage(bot: Bot<LarkCredentials>, messageId: string, timeoutMs: number): Promise<ApiResult<LarkMessage[]>> {
  const until = Date.now() + timeoutMs;
  const token = await larkApi(bot, timeoutMs).tenantToken();
  if (!token.ok) return token;
  const left = until - Date.now();
  if (left <= 0) return { ok: false, failure: { kind: "transient", status: null, code: "timeout", message: `no answer within ${timeoutMs} ms` } };
  // The token is cached now: the read has what is left. A card comes as its sender sent it, not cut down (./card-text.ts).
  const res = await larkApi(bot, left).call("GET", `/open-apis/im/v1/messages/${pathSegment(messageId)}?card_msg_content_type=user_card_content`, null);
  if (!res.ok) return res;
  // A field sent as null counts as absent, as in an event; an item not of this shape is left out, not the others.
  const given = withoutNulls(res.value).items;
  const items = (Array.isArray(given) ? given : []).flatMap((item) => LarkMessageSchema.safeParse(item).data ?? []);
  const message = items.find((item) => item.message_id === messageId);
  if (!message) return { ok: false, failure: { kind: "permanent", status: 200, code: "lark_no_message", message: "the answer named no such message" } };
  return { ok: true, value: [message, ...items.filter((item) => item !== message)] };
}
