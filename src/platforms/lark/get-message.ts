/**
 * One Lark message read by id: `GET /open-apis/im/v1/messages/{message_id}`. Its `data.items` holds the message, and
 * for a merge_forward its sub-messages after it (each naming it in `upper_message_id`). The app needs the permission
 * to read the chat's messages (in a group, Feishu's "read all messages in groups", im:message.group_msg).
 */
import * as z from "zod";
import type { ApiResult, Bot } from "../types";
import { withoutNulls } from "../payload";
import { larkApi, type LarkCredentials } from "./api";

/** A message as the API gives it (not as an event does: `msg_type`, `body.content`, a mention's `id` a string). */
export const LarkMessageSchema = z.looseObject({
  message_id: z.string(),
  msg_type: z.string(),
  /** Recalled: its content is only Lark's notice of that. */
  deleted: z.boolean().optional(),
  upper_message_id: z.string().optional(),
  sender: z.looseObject({ id: z.string().optional(), id_type: z.string().optional(), sender_type: z.string().optional() }).optional(),
  body: z.looseObject({ content: z.string() }).optional(),
  mentions: z.array(z.looseObject({ key: z.string(), id: z.string().optional(), name: z.string().optional() })).optional(),
});
export type LarkMessage = z.infer<typeof LarkMessageSchema>;

const ItemsSchema = z.looseObject({ items: z.array(LarkMessageSchema) });

/** The message (first) and, for a merge_forward, its sub-messages; a failure as Lark's calls fail. */
export async function getLarkMessage(bot: Bot<LarkCredentials>, messageId: string, timeoutMs: number): Promise<ApiResult<LarkMessage[]>> {
  const res = await larkApi(bot, timeoutMs).call("GET", `/open-apis/im/v1/messages/${encodeURIComponent(messageId)}`, null);
  if (!res.ok) return res;
  // A field sent as null counts as absent, as in an event.
  const items = ItemsSchema.safeParse(withoutNulls(res.value)).data?.items ?? [];
  const message = items.find((item) => item.message_id === messageId);
  if (!message) return { ok: false, failure: { kind: "permanent", status: 200, code: "lark_no_message", message: "the answer named no such message" } };
  return { ok: true, value: [message, ...items.filter((item) => item !== message)] };
}
