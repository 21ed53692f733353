import type { Db } from "../db/client";
import { scrub } from "../lib/scrub";
import { matcherOf } from "../lib/secret-matcher";
import { secretFragments, urlSecrets } from "../resources/secrets";
import { registryStore } from "../stores/registry";
import { runnerServiceSlot } from "../stores/secret-slots";

/** A runner service's own words as the host quotes them back (a runner's name, its manifest's problems). */
export type ManifestQuote = (text: string) => string;

/**
 * Quotes without the service's secrets, which a manifest may well repeat (its address with its key, a name made of its
 * secret): the secret sent with this request, the one stored for the service (`serviceId`, else the service at
 * `base_url`), and the credentials in either's address. A stored secret the host's keys cannot open is not looked for.
 */
export async function manifestQuote(db: Db, service: { base_url: string; secret?: string | null; serviceId?: string }): Promise<ManifestQuote> {
  const store = registryStore(db);
  const stored = service.serviceId ? await store.getService(service.serviceId) : await store.getServiceAt(service.base_url);
  const storedSecret = stored?.secret ? await db.secrets.open(stored.secret, runnerServiceSlot(stored)).catch(() => null) : null;
  const matcher = matcherOf(secretFragments([service.secret, storedSecret, ...urlSecrets(service.base_url), ...(stored ? urlSecrets(stored.baseUrl) : [])]));
  return (text) => scrub(text, matcher);
}
