/**
 * Users' names by open_id (`GET /open-apis/contact/v3/users/batch`), for messages Lark lists by their senders' ids
 * only (a merged forward's). The app needs a contact permission for it (contact:user.base:readonly) and sees only the
 * users in its contact scope: best effort, bounded by the time given. Names are kept per isolate for an hour; a
 * refusal (an app without the permission) a minute, the names meanwhile not asked for.
 */
import * as z from "zod";
import { loggedText } from "../../lib/log-text";
import { scrubSecrets } from "../redact";
import type { Bot } from "../types";
import { larkApi, type LarkCredentials } from "./api";

const KEPT_MS = 60 * 60 * 1000;
const REFUSAL_KEPT_MS = 60 * 1000;
const CALL_TIMEOUT_MS = 1_000;
/** Below this, a call is not worth starting. */
const MIN_CALL_MS = 100;
/** The most ids the endpoint takes at once. */
const BATCH = 50;
/** Kept names are dropped past this many, so a long-lived isolate's memory stays bounded. */
const MAX_KEPT = 10_000;
const names = new Map<string, { name: string; until: number }>();
const refused = new Map<string, number>();

const UserSchema = z.looseObject({ open_id: z.string(), name: z.string().min(1) });

/** The names Lark gave of `openIds` (those it did not, left out); never rejects. */
export async function larkUserNames(bot: Bot<LarkCredentials>, openIds: string[], timeoutMs: number): Promise<Map<string, string>> {
  // A bot whose app or API origin changed sees another contact scope.
  const app = `${bot.apiBaseUrl}\n${bot.credentials.app_id}`;
  const found = new Map<string, string>();
  const now = Date.now();
  const wanted: string[] = [];
  for (const id of new Set(openIds)) {
    const kept = names.get(`${app}\n${id}`);
    if (kept && kept.until > now) found.set(id, kept.name);
    else wanted.push(id);
  }
  const limit = Math.min(timeoutMs, CALL_TIMEOUT_MS);
  if (wanted.length === 0 || limit < MIN_CALL_MS || (refused.get(app) ?? 0) > now) return found;
  const until = now + limit;
  for (let i = 0; i < wanted.length && Date.now() + MIN_CALL_MS < until; i += BATCH) {
    const query = new URLSearchParams({ user_id_type: "open_id" });
    for (const id of wanted.slice(i, i + BATCH)) query.append("user_ids", id);
    const res = await larkApi(bot, until - Date.now()).call("GET", `/open-apis/contact/v3/users/batch?${query}`, null);
    if (!res.ok) {
      // Lark's refusal (an app without the permission) stands a while; no answer in time may be luck.
      if (res.failure.status !== null) refused.set(app, Date.now() + REFUSAL_KEPT_MS);
      console.warn(`lark bot ${bot.botId}: users' names were not read (${loggedText(scrubSecrets(res.failure.message, bot.credentials))}); they are shown by number`);
      return found;
    }
    if (names.size > MAX_KEPT) names.clear();
    const items = res.value.items;
    for (const user of Array.isArray(items) ? items : []) {
      const u = UserSchema.safeParse(user);
      if (!u.success) continue;
      found.set(u.data.open_id, u.data.name);
      names.set(`${app}\n${u.data.open_id}`, { name: u.data.name, until: Date.now() + KEPT_MS });
    }
  }
  return found;
}
