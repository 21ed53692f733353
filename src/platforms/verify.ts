import { HostError, unauthorized } from "../lib/errors";
import { loggedText } from "../lib/log-text";
import { jsonShapeProblem } from "../protocol/common";

/** The one refusal every platform gets for a request it cannot prove came from the platform. */
export const refused = (why: string) => unauthorized(`webhook refused: ${why}`);

/**
 * A request the platform did sign, for another bot: another installation of an app whose secret this bot shares (a
 * Slack app installed in two workspaces), or another app. 403, not 401: the bot's secret is right, so its admin view
 * must not blame it. `headers`: what tells the platform not to send it again (Slack's `X-Slack-No-Retry`).
 */
export const notThisBot = (why: string, headers?: Record<string, string>) => new HostError(403, "forbidden", `webhook refused: ${why}`, undefined, { headers });

/** An id a refusal names as the request gave it: escaped and cut, so it reads as one id in a log line. */
export const namedId = (id: string) => loggedText(id, 80);

/**
 * Deeper than any platform nests a payload (Slack's blocks, Discord's components: a few dozen levels at most). The
 * host walks payloads recursively (null fields, schemas, the stored copy): a deeper one would overflow the stack.
 */
export const MAX_PAYLOAD_DEPTH = 128;

/** A webhook body as JSON; signatures are checked on the raw text before this. */
export function parseBody(raw: string): unknown {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new HostError(400, "invalid_json", "request body is not valid JSON");
  }
  return withinPayloadDepth(body);
}

/** A verified payload nested no deeper than MAX_PAYLOAD_DEPTH, else a 400 (checked without recursion). */
export function withinPayloadDepth<T>(payload: T): T {
  if (jsonShapeProblem(payload, MAX_PAYLOAD_DEPTH, { depthOnly: true }) !== null) throw new HostError(400, "invalid_json", `request body is JSON nested deeper than ${MAX_PAYLOAD_DEPTH} levels`);
  return payload;
}

/** Text that should hold JSON (a Lark message's `content`), parsed; undefined when it is not JSON or nests deeper than a payload may. */
export function parseNested(raw: string): unknown {
  try {
    const value: unknown = JSON.parse(raw);
    return jsonShapeProblem(value, MAX_PAYLOAD_DEPTH, { depthOnly: true }) === null ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A signed timestamp (Unix seconds) must be at most `maxAgeSeconds` away from
 * now: a captured request replayed later is refused even once EventLog no
 * longer holds its event id (retention keeps ids for at least a day).
 */
export function checkFreshness(timestamp: string, now: number, maxAgeSeconds: number, header: string): void {
  if (!/^\d{1,12}$/.test(timestamp)) throw refused(`malformed ${header}`);
  if (Math.abs(now / 1000 - Number(timestamp)) > maxAgeSeconds) throw refused(`${header} is more than ${maxAgeSeconds / 60} minutes away from now`);
}
