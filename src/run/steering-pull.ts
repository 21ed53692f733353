import { sql } from "drizzle-orm";
import { batchAll, type Db } from "../db/client";
import { insertWhereOnConflict } from "../db/guarded";
import { eventLog } from "../db/schema";
import { hostRecordValues } from "../stores/event-log";
import { recalled, recalledAmong } from "../stores/recalled-message";
import type { RunJob } from "./job";
import { steeringOutcomeRecord, type ClaimRef } from "./steering";

const column = (c: { name: string }) => sql.identifier(c.name);

/** As steeringOutcomeInsert's drop: over an injected record whose answer never reached the runner. */
const overInjected = sql`ON CONFLICT (${column(eventLog.eventId)}) DO UPDATE SET ${sql.join(
  [eventLog.eventType, eventLog.dataJson, eventLog.metadataJson].map((c) => sql`${column(c)} = excluded.${column(c)}`),
  sql`, `,
)} WHERE ${eventLog.eventType} = 'steering.injected'`;

/** `steering.dropped`, reason `recalled`, written only if the claim's message is marked recalled. */
const droppedIfRecalled = (db: Db, claim: ClaimRef, run: RunJob) =>
  insertWhereOnConflict(db, eventLog, hostRecordValues(steeringOutcomeRecord("dropped", claim, run, "recalled")), recalled(claim.event_id), overInjected);

/**
 * A pull's records, in one batch: each claimed message taken `steering.injected`, unless its user recalled it and that
 * recall's work in the conversation's object was never done (its call failed; the platform sends it again later):
 * recorded `steering.dropped`, reason `recalled`, as that work records it, and not answered. Each insert checks the
 * message's mark itself (src/stores/recalled-message.ts); the batch's first statement reads the same marks (one
 * transaction), so the answer matches what was written. Answers the ids of the events found recalled.
 */
export async function recordPull(db: Db, claims: ClaimRef[], run: RunJob): Promise<Set<string>> {
  if (!claims.length) return new Set();
  const writes = claims.flatMap((claim) => [
    // Recorded once whatever retries it (an earlier pull's record applied unanswered, its items put back).
    insertWhereOnConflict(db, eventLog, hostRecordValues(steeringOutcomeRecord("injected", claim, run)), sql`NOT ${recalled(claim.event_id)}`, sql`ON CONFLICT (${column(eventLog.eventId)}) DO NOTHING`),
    droppedIfRecalled(db, claim, run),
  ]);
  const [found] = await batchAll(db, [recalledAmong(db, claims.map((c) => c.event_id)), ...writes]);
  return new Set((found as { eventId: string }[]).map((r) => r.eventId));
}

/**
 * An ended run's drop records: each claim `steering.dropped`, with `reason: "recalled"` when its message is marked
 * recalled (that recall's work in the object never done: README "Steering"), each insert checking the mark itself.
 */
export const dropStatements = (db: Db, claims: ClaimRef[], run: RunJob) =>
  claims.flatMap((claim) => [
    insertWhereOnConflict(db, eventLog, hostRecordValues(steeringOutcomeRecord("dropped", claim, run)), sql`NOT ${recalled(claim.event_id)}`, overInjected),
    droppedIfRecalled(db, claim, run),
  ]);
