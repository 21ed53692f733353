import type { Env } from "../env";
import { durableObjectIdOfRun } from "../lib/ids";

/** The Durable Object that owns a run, from the id alone (no database lookup); null for an id this host never issued. */
export function ownerOf(env: Env, runId: string) {
  const hex = durableObjectIdOfRun(runId);
  if (!hex) return null;
  try {
    return env.CONVERSATIONS.get(env.CONVERSATIONS.idFromString(hex));
  } catch {
    // Well-formed but not an id of this namespace: a forged or foreign run id.
    return null;
  }
}
