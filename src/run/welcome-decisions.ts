import { and, eq, inArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog, run } from "../db/schema";
import { NOT_STARTED } from "../stores/runs";
import type { RunJob } from "./job";

/** Ids per statement: well under SQLite's 999 placeholders. */
const IDS_PER_STATEMENT = 400;

/**
 * The `merged` decisions of the Slack joins gathered into a welcome run (durable-objects/welcomes.ts), written (again:
 * idempotent) as it starts, in a few statements however many joined; and its own event's record given the members its
 * run is told of, so `event.get` reads what the run read. A join whose own decision write failed is sent again by
 * Slack, maybe after this run ended and its conversation forgot it: its event then already says `merged`, and it never
 * runs a second time.
 */
export function welcomeDecisions(db: Db, job: RunJob): unknown[] {
  if (!job.joined?.events.length) return [];
  return [db.update(eventLog).set({ dataJson: JSON.stringify(job.event.data) }).where(eq(eventLog.eventId, job.event.event_id)), ...joinDecisions(db, job)];
}

/**
 * The joins' `merged` decisions alone: also written as an operator cancels the welcome before it began, whose joins go
 * with it (one whose own write failed would otherwise be welcomed on its own when Slack sends it again).
 */
export function joinDecisions(db: Db, job: RunJob): unknown[] {
  const events = job.joined?.events ?? [];
  const statements: unknown[] = [];
  const patch = JSON.stringify({ joined_with: job.event.event_id });
  for (let at = 0; at < events.length; at += IDS_PER_STATEMENT) {
    const chunk = events.slice(at, at + IDS_PER_STATEMENT);
    statements.push(
      db
        .update(eventLog)
        .set({ disposition: "merged", runId: job.runId, metadataJson: sql`json_patch(${eventLog.metadataJson}, ${patch})` })
        .where(inArray(eventLog.eventId, chunk.map((e) => e.eventId))),
      db.delete(run).where(and(inArray(run.runId, chunk.map((e) => e.runId)), inArray(run.status, [...NOT_STARTED]))),
    );
  }
  return statements;
}
