/**
 * Where an answer continues once Discord refuses its interaction token (15 minutes), when the interaction's channel
 * will not do: an app installed only to the user is no member of the server or DM it was used in (a post there is
 * refused, 403, and each refusal counts toward Discord's ban on clients that keep getting them), and the answer to a
 * press on an ephemeral message was the user's alone to see. It continues in a direct message to the user who asked
 * (`POST /users/@me/channels`), opened by a line saying why it is there. Discord may refuse that too (the user takes
 * no DMs from the app): the refusal is kept, so no later part of the answer asks again.
 */
import { asRecord, callPlatform, failureOfStatus, repeatable } from "../http";
import type { ApiFailure, ApiResult } from "../types";
import { retryAfterOf, type RouteLimits } from "./route-limits";

export const DM_NOTE = "(Discord no longer lets this app answer where you asked: the answer continues here.)";

/** The code a refused DM is recorded with. */
export const DM_REFUSED = "discord_dm_refused";

/** A permanent refusal of the DM (opening it, or its first message), said as such. */
export function dmRefused(failure: ApiFailure): { ok: false; failure: ApiFailure } {
  const message = `the interaction's token expired (15 minutes) and Discord refused a direct message to the user: ${failure.message}`;
  return { ok: false, failure: { ...failure, kind: "permanent", code: DM_REFUSED, message } };
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
  const failure = failureOfStatus(status, `discord_http_${status}`, typeof data.message === "string" ? data.message : `HTTP ${status}`, retryAfterMs);
  return failure.kind === "permanent" ? dmRefused(failure) : repeatable({ ok: false, failure });
}
