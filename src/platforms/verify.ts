import { HostError, unauthorized } from "../lib/errors";

/** The one refusal every platform gets for a request it cannot prove came from the platform. */
export const refused = (why: string) => unauthorized(`webhook refused: ${why}`);

/** A webhook body as JSON; signatures are checked on the raw text before this. */
export function parseBody(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    throw new HostError(400, "invalid_json", "request body is not valid JSON");
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
