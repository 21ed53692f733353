import { randomHex } from "./crypto";

/** Time-ordered, random ids: `{prefix}_{base36 ms}{16 hex}`. */
export function newId(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}${randomHex(8)}`;
}

/**
 * A run id names the Durable Object that owns the run, so a Host API call is
 * routed to its owner without a database lookup. The DO still checks the run
 * token; a forged id only reaches an object that does not know the run.
 */
const RUN_ID = /^run_([0-9a-f]{64})_([0-9a-z]{8,40})$/;

/** The hex characters of the random part that ends a run id (6 bytes). */
const RUN_RANDOM_CHARS = 12;

export function newRunId(durableObjectId: string): string {
  return `run_${durableObjectId}_${Date.now().toString(36)}${randomHex(RUN_RANDOM_CHARS / 2)}`;
}

/** When ingress minted a run id, as it accepted the run's event (ms since the epoch); null for an id not newRunId's. */
export function mintedAtOfRun(runId: string): number | null {
  const tail = RUN_ID.exec(runId)?.[2];
  if (!tail || tail.length <= RUN_RANDOM_CHARS) return null;
  const at = parseInt(tail.slice(0, -RUN_RANDOM_CHARS), 36);
  return Number.isSafeInteger(at) ? at : null;
}

export function durableObjectIdOfRun(runId: string): string | null {
  return RUN_ID.exec(runId)?.[1] ?? null;
}
