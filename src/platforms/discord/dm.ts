/**
 * Where an answer continues once Discord refuses its interaction token (15 minutes), when the interaction's channel
 * will not do: an app installed only to the user is no member of the server or DM it was used in (a post there is
 * refused, 403, and each refusal counts toward Discord's ban on clients that keep getting them), and the answer to a
 * press on an ephemeral message was the user's alone to see; a server's channel may refuse the bot itself (403: no
 * View Channel or Send Messages there), which an interaction's own answer never needed. It continues in a direct
 * message to the user who asked (`POST /users/@me/channels`), opened by a line saying why it is there. Discord may refuse that too: the refusal is
 * kept, so no later part of the answer asks again. Only its code 50007 says the user takes no DMs from the app; any
 * other refusal (a revoked bot token's 401) keeps Discord's status as its code, so an operator sees the real cause.
 * The "thinking…" left in the interaction's channel stays: the bot token cannot reach it (the bot is no member there,
 * and an ephemeral message only the interaction's token can edit or delete).
 */
import { asRecord, callPlatform, failureOfStatus, repeatable } from "../http";
import type { ApiFailure, ApiResult } from "../types";
import { retryAfterOf, type RouteLimits } from "./route-limits";

export const DM_NOTE = "(Discord no longer lets this app answer where you asked: the answer continues here.)";

/** The code a DM refused because the user cannot be messaged is recorded with. */
export const DM_REFUSED = "discord_dm_refused";
/** Discord's JSON code for "Cannot send messages to this user" (they take no DMs from the app). */
const CANNOT_MESSAGE_USER = 50007;

/** A refusal's code: DM_REFUSED when Discord says the user cannot be messaged, else Discord's HTTP status. */
export const refusalCode = (status: number, data: Record<string, unknown>): string => (data.code === CANNOT_MESSAGE_USER ? DM_REFUSED : `discord_http_${status}`);

/** A permanent refusal of the DM (opening it, or a message in it), said as such; its code stays the refusal's own. */
export function dmRefused(failure: ApiFailure): { ok: false; failure: ApiFailure } {
  const message = `the interaction's token expired (15 minutes) and Discord refused a direct message to the user: ${failure.message}`;
  return { ok: false, failure: { ...failure, kind: "permanent", message } };
}

/** The bot's DM channel with the user: its id. Opening it again finds the same channel, so a failure is repeatable. */
export async function openDm(apiBaseUrl: string, botToken: string, userId: string, limits: RouteLimits, timeoutMs: number): Promise<ApiResult<string>> {
  const route = "POST /users/@me/channels";
  await limits.ready(route, timeoutMs);
  const res = await callPlatform(
    `${apiBaseUrl}/users/@me/channels`,
    { method: "POST", headers: { authorization: `Bot ${botToken}`, "content-type": "application/json; charset=utf-8" }, body: JSON.stringify({ recipient_id: userId }) },
    timeoutMs,
  );
  if (!res.ok) return repeatable(res);
  const { status, headers, json } = res.value;
  const data = asRecord(json);
  const retryAfterMs = retryAfterOf(data, headers);
  limits.noted(route, status, headers, retryAfterMs);
  if (status >= 200 && status < 300 && typeof data.id === "string") return { ok: true, value: data.id };
  const failure = failureOfStatus(status, refusalCode(status, data), typeof data.message === "string" ? data.message : `HTTP ${status}`, retryAfterMs);
  return failure.kind === "permanent" ? dmRefused(failure) : repeatable({ ok: false, failure });
}
