import { sql } from "drizzle-orm";
import { batchAll, type Db } from "../db/client";
import { insertWhereOnConflict } from "../db/guarded";
import { eventLog } from "../db/schema";
import { hostRecordValues } from "../stores/event-log";
import { recalled, recalledAmong } from "../stores/recalled-message";
import type { RunJob } from "./job";
import { steeringOutcomeRecord, type ClaimRef } from "./steering";

const column = (c: { name: string }) => sql.identifier(c.name);

/**
 * A pull's records, in one batch: each claimed message taken `steering.injected`, unless its user recalled it and that
 * recall's work in the conversation's object was never done (its call failed; the platform sends it again later):
 * recorded `steering.dropped`, reason `recalled`, as that work records it, and not answered. Each insert checks the
 * message's mark itself (src/stores/recalled-message.ts); the batch's first statement reads the same marks (one
 * transaction), so the answer matches what was written. Answers the ids of the events found recalled.
 */
export async function recordPull(db: Db, claims: ClaimRef[], run: RunJob): Promise<Set<string>> {
  if (!claims.length) return new Set();
  const writes = claims.flatMap((claim) => {
    const [injected, dropped] = [steeringOutcomeRecord("injected", claim, run), steeringOutcomeRecord("dropped", claim, run, "recalled")];
    return [
      // Recorded once whatever retries it (an earlier pull's record applied unanswered, its items put back).
      insertWhereOnConflict(db, eventLog, hostRecordValues(injected), sql`NOT ${recalled(claim.event_id)}`, sql`ON CONFLICT (${column(eventLog.eventId)}) DO NOTHING`),
      // As steeringOutcomeInsert's drop: over an injected record whose answer never reached the runner.
      insertWhereOnConflict(
        db,
        eventLog,
        hostRecordValues(dropped),
        recalled(claim.event_id),
        sql`ON CONFLICT (${column(eventLog.eventId)}) DO UPDATE SET ${sql.join(
          [eventLog.eventType, eventLog.dataJson, eventLog.metadataJson].map((c) => sql`${column(c)} = excluded.${column(c)}`),
          sql`, `,
        )} WHERE ${eventLog.eventType} = 'steering.injected'`,
      ),
    ];
  });
  const [found] = await batchAll(db, [recalledAmong(db, claims.map((c) => c.event_id)), ...writes]);
  return new Set((found as { eventId: string }[]).map((r) => r.eventId));
}
