import type { Db } from "../src/db/client";
import type { SteeringInputItem } from "../src/protocol/host-api-results";
import type { RunJob } from "../src/run/job";
import { claimMetadata, steeringItemOf } from "../src/run/steering";
import { decidedWithoutOwnRun } from "../src/stores/event-log";

/** What a steering queue notes in storage of a claim whose write got no answer (steering-queue.ts `claim`). */
export interface UnsettledClaim {
  eventId: string;
  item: SteeringInputItem;
}

/** A claim whose write is on its way: what taking it back needs, and the instance writing it. */
export interface ClaimInFlight {
  job: RunJob;
  target: { runId: string; runner: { runnerId: string } };
  at: number;
  /** Its place in the target's queue. */
  key: string;
  instance: string;
  /** The version of the edit its words are (none: as sent), so an older edit arriving late changes nothing. */
  revision?: number;
}
export const itemOf = (c: ClaimInFlight) => steeringItemOf(c.job, c.target, c.at);

/** The claim of an event, as recorded: steered into the claiming run, its own run discarded. */
export const claimStatements = (db: Db, eventId: string, runId: string, item: SteeringInputItem) =>
  decidedWithoutOwnRun(db, eventId, runId, { disposition: "steered", runId: item.claimed_run_id, metadata: claimMetadata(item) });
