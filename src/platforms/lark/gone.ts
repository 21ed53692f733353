/**
 * Lark's refusals of an answer whose place changed while its run went on (the reply API's documented codes). The
 * message replied to is gone: recalled by its sender or an admin (230011), deleted (230110), or about to destruct itself
 * (230111); the answer goes on beside it (api.ts). The chat refuses the bot for good: the bot was removed from it
 * (230002, "The bot can not be outside the group"), or it was dissolved (232009): no later call of the reply is made
 * there (placeGone).
 */
import type { ApiFailure, ApiResult } from "../types";

const MESSAGE_GONE = new Map([
  ["lark_230011", "recalled"],
  ["lark_230110", "deleted"],
  ["lark_230111", "about to destruct itself"],
]);
const CHAT_GONE = new Set(["lark_230002", "lark_232009"]);

/** How the message replied to went, when Lark refused the reply for that. */
export const messageGone = (failure: ApiFailure): string | null => MESSAGE_GONE.get(failure.code) ?? null;

/** A refusal for the chat itself, flagged for the session. */
export function chatRefusal<T>(res: ApiResult<T>): ApiResult<T> {
  return res.ok || !CHAT_GONE.has(res.failure.code) ? res : { ok: false, failure: { ...res.failure, placeGone: true } };
}
