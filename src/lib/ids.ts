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

export function newRunId(durableObjectId: string): string {
  return `run_${durableObjectId}_${Date.now().toString(36)}${randomHex(6)}`;
}

export function durableObjectIdOfRun(runId: string): string | null {
  return RUN_ID.exec(runId)?.[1] ?? null;
}
