import { badRequest } from "../lib/errors";
import { parseJson } from "../lib/json";
import { moveSealed, moveSealedValues, type SecretBox, type SecretSlot } from "../lib/secret-box";
import { MASK, maskUrl } from "./secrets";

/**
 * What a resource's PUT stores for its credentials, as bots and runner services do: a value sent replaces the stored
 * one; one left out, or sent back as GET masked it, keeps it (sealed again for the row's new endpoint when that
 * changed, so it still opens there). Nothing stored is opened unless the endpoint changed, so a key that no longer
 * opens can still be replaced.
 */
type Slot = Omit<SecretSlot, "name">;

/** The endpoint as GET shows it (the credentials in it masked) keeps the stored one; any other replaces it. */
export const keptEndpoint = (sent: string, stored: string): string => (sent === maskUrl(stored) ? stored : sent);

/** An API key: `undefined` or the mask keeps it, `null` clears it (where it is optional), a string replaces it. */
export async function replacedKey(box: SecretBox, sent: string | null | undefined, stored: string | null, from: Slot, to: Slot, field: string): Promise<string | null> {
  if (sent === MASK && stored === null) throw badRequest(`${field} is the mask ${MASK}, but there is no stored key to keep`);
  if (sent === undefined || sent === MASK) return moveSealed(box, stored, from, to);
  return box.seal(sent, to);
}

/**
 * Header values: left out, all are kept; given, the record replaces the stored one (a header not named is dropped),
 * and a value given as the mask keeps the stored value of that name.
 */
export async function replacedHeaders(box: SecretBox, sent: Record<string, string> | undefined, storedJson: string | null, from: Slot, to: Slot): Promise<string> {
  const stored = parseJson<Record<string, string>>(storedJson ?? "{}", {});
  if (sent === undefined) return JSON.stringify(await moveSealedValues(box, stored, from, to));
  const unknown = Object.keys(sent).filter((name) => sent[name] === MASK && !Object.hasOwn(stored, name));
  if (unknown.length) throw badRequest(`headers give the mask ${MASK} for headers with no stored value to keep: ${unknown.join(", ")}`, { masked: unknown });
  const entries = await Promise.all(
    Object.entries(sent).map(async ([name, value]) => [name, value === MASK ? await moveSealed(box, stored[name], { ...from, name }, { ...to, name }) : await box.seal(value, { ...to, name })]),
  );
  return JSON.stringify(Object.fromEntries(entries));
}
