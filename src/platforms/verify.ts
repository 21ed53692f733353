import { constantTimeEqual, sha256Hex } from "../lib/crypto";
import { HostError, unauthorized } from "../lib/errors";

/**
 * Whether a presented secret equals the expected one, in constant time
 * whatever their lengths: their SHA-256 digests are compared.
 */
export async function secretsEqual(given: string | null | undefined, expected: string): Promise<boolean> {
  if (given == null) return false;
  return constantTimeEqual(await sha256Hex(given), await sha256Hex(expected));
}

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
