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
