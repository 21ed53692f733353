/**
 * A platform event's raw webhook payload in R2 (`raw/{platform}/{bot}/…`, the EventLog's `raw_ref`): stored once per
 * platform event with its secret fields removed, and read back for an operator (GET /v1/admin/events/{id}/raw).
 */
import { eq } from "drizzle-orm";
import { dbOf } from "../db/connect";
import { eventLog } from "../db/schema";
import type { Env } from "../env";
import { loggedError } from "../lib/describe-error";
import { loggedId } from "../lib/log-text";
import { artifactsOf } from "../artifacts/bucket";
import { sha256Hex } from "../lib/crypto";
import { ADAPTERS } from "./registry";
import { type Bot, type PlatformAdapter, isPlatform } from "./types";

const CONTENT_TYPE = "application/json";

/**
 * The redacted payload, once per platform event: the first one stored stays.
 * A redelivery carries the same facts, and another payload for the same event
 * (Slack's `app_mention` copy of a `message`) is refused as a duplicate, so
 * it must not replace what the recorded event's `raw_ref` names. `deadlineAt`: when the platform wants its answer,
 * which bounds the put too.
 */
export async function storeRaw(env: Env, adapter: PlatformAdapter, rawRef: string, raw: unknown, deadlineAt?: number): Promise<void> {
  // "*": only when no object is there yet (If-None-Match); otherwise put answers null and writes nothing.
  await artifactsOf(env, deadlineAt).put(rawRef, JSON.stringify(adapter.redactRaw(raw)), { httpMetadata: { contentType: CONTENT_TYPE }, onlyIf: { etagDoesNotMatch: "*" } });
}

/**
 * A request's payload on its way to R2 (storeRaw), put while its events are recorded, their rows naming it already.
 * On a request the platform never sends again (PlatformAdapter's `sentOnce`) a payload R2 does not take cannot fail
 * the request, so `held` takes its name back instead: asked once a row names it, it settles with the put, and when R2
 * did not take it clears the name off the rows this request recorded so far (logged once), answering false, so that
 * no run handed an event after it names a payload the host cannot serve (acceptEvent), nor does any record. A put
 * that lands after all leaves a blob nothing names, which the orphan sweep removes. Never rejects: the event goes on
 * either way; a row it could not clear reads as a payload no longer stored.
 */
export class RawCopy {
  /** The put's failure, once settled: null when stored. */
  readonly failure: Promise<{ cause: unknown } | null>;
  private warned = false;

  constructor(
    private readonly env: Env,
    private readonly bot: Bot,
    readonly rawRef: string,
    put: Promise<void>,
  ) {
    this.failure = put.then(
      () => null,
      (cause: unknown) => ({ cause }),
    );
  }

  /** Whether the rows may name the payload: true once stored; false once R2 did not take it, the rows cleared of it. */
  async held(): Promise<boolean> {
    const failed = await this.failure;
    if (!failed) return true;
    const { botId, platform } = this.bot;
    if (!this.warned) console.warn(`bot ${loggedId(botId)} (${platform}): a request sent only once kept without its raw payload ${this.rawRef}: ${loggedError(failed.cause)}`);
    this.warned = true;
    await dbOf(this.env)
      .update(eventLog)
      .set({ rawRef: null })
      .where(eq(eventLog.rawRef, this.rawRef))
      .run()
      .catch((err: unknown) => console.error(`bot ${loggedId(botId)} (${platform}): its events still name the raw payload ${this.rawRef}, not stored: ${loggedError(err)}`));
    return false;
  }
}

/** Where storeRaw keeps the payload of the platform event `key` (its `raw_ref`), known before it is stored. */
export const rawRefOf = async (bot: Bot, key: string): Promise<string> => `raw/${bot.platform}/${encodeURIComponent(bot.botId)}/${(await sha256Hex(key)).slice(0, 40)}.json`;


/**
 * The stored payload as an operator reads it, or null when R2 no longer holds it (retention deleted it). Redacted
 * again on the way out with the platform's current list of secret fields: a field added to that list since the
 * payload was stored (Lark's card `event.token`) is never shown from one stored before.
 */
export async function readRaw(env: Env, source: string, rawRef: string): Promise<{ body: string; contentType: string } | null> {
  const object = await artifactsOf(env).get(rawRef);
  if (!object) return null;
  const text = await object.text();
  const contentType = object.httpMetadata?.contentType ?? CONTENT_TYPE;
  if (!isPlatform(source)) return { body: text, contentType };
  // Stored by JSON.stringify: parsed and written again the same way, a payload with nothing to remove is given back byte for byte.
  return { body: JSON.stringify(ADAPTERS[source].redactRaw(JSON.parse(text))), contentType };
}
