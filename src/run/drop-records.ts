import { sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { insertFromWhereReturning, insertWhere } from "../db/guarded";
import { eventLog, run, runEvent } from "../db/schema";
import { hostRecordValues, type HostRecord, type RecordPlace } from "../stores/event-log";
import { whileRunning } from "../stores/while-running";
import { MAX_AUDITED_DROPS, UNKNOWN_TYPE_WARNING } from "./drop-audit-cap";

/**
 * A dropped result's `runner.result_dropped` audit (ResultProcessor), written with its result and warning, only while
 * its run is running: a write that lands after the run's end (unanswered, applied late) adds no audit the end's count
 * (unauditedDropsInsert) has counted already.
 */
export function dropAuditInsert(db: Db, runId: string, audit: HostRecord) {
  return insertWhere(db, eventLog, hostRecordValues(audit), whileRunning(runId));
}

/** The run a count of unaudited drops is written for. */
export interface DropCountTarget {
  runId: string;
  runnerId: string;
  place: RecordPlace & { conversationKey: string };
}

const DROPS = sql.identifier("drops");
const column = (name: string) => sql`${DROPS}.${sql.identifier(name)}`;

/**
 * The `runner.result_dropped` record of a run's drops that have no audit of their own (none when every one has), as
 * the statements that write it (none for a run that dropped nothing): `drops` (the run's count, or SQL counting them)
 * less the run's audits EventLog holds when it runs. Counted by the write itself, not before it, so a write of audits
 * that got no answer counts as what it did: applied before it, its audits are there; never applied (or applied after
 * the run's end, which writes no audit: execute.ts), they are counted here. Its own id: a run's end written twice (or
 * by the host after its own write of it went unanswered) still leaves one. `endedHere`: only if the statement just
 * before it wrote a row (`changes()`), the write's end of the run: a run's own end landing after the host ended the run
 * counts nothing the host's end did not (the drops of results its ledger never got among them).
 */
export function unauditedDropsInsert(db: Db, target: DropCountTarget, drops: number | SQL, opts: { endedHere?: boolean } = {}) {
  if (drops === 0) return [];
  const { runId, runnerId, place } = target;
  const e = eventLog;
  // The run's audits: in its conversation's range of the EventLog index, from its event on (no table scan).
  const since = sql`COALESCE((SELECT ${e.seq} FROM ${e} WHERE ${e.eventId} = (SELECT ${run.eventId} FROM ${run} WHERE ${run.runId} = ${runId})), 0)`;
  const audited = sql`(SELECT COUNT(*) FROM ${e} WHERE ${e.conversationKey} = ${place.conversationKey} AND ${e.seq} > ${since} AND ${e.runId} = ${runId} AND ${e.eventType} = 'runner.result_dropped' AND json_extract(${e.dataJson}, '$.ledger_seq') IS NOT NULL)`;
  // Cast: a number bound from JS may arrive as a float, which would read "50.0" in the reason.
  const counts = sql`SELECT seen - audited AS suppressed, MIN(seen, CAST(${MAX_AUDITED_DROPS} AS INTEGER)) - audited AS unwritten FROM (SELECT CAST(${drops} AS INTEGER) AS seen, ${audited} AS audited)`;
  const [suppressed, unwritten] = [column("suppressed"), column("unwritten")];
  // Those among the first MAX_AUDITED_DROPS without their audit were in a write the database refused or never applied.
  const refusedText = [` dropped results of this run were not recorded: only the first ${MAX_AUDITED_DROPS} of a run get one, and the write of `, " of those was refused or never applied"];
  const pastCapText = ` more dropped results of this run were not recorded: only the first ${MAX_AUDITED_DROPS} of a run are (its ledger warns of each)`;
  const reason = sql`CASE WHEN ${unwritten} > 0 THEN ${suppressed} || ${refusedText[0]} || ${unwritten} || ${refusedText[1]} ELSE ${suppressed} || ${pastCapText} END`;
  const data = sql`json_object('run_id', ${runId}, 'runner_id', ${runnerId}, 'result_type', NULL, 'sequence', NULL, 'ledger_seq', NULL, 'reason', ${reason}, 'suppressed', ${suppressed})`;
  const guard = opts.endedHere ? sql`${suppressed} > 0 AND changes() = 1` : sql`${suppressed} > 0`;
  const statement = insertFromWhereReturning(
    db,
    e,
    {
      eventId: `hev_drops_${runId}`,
      eventType: "runner.result_dropped",
      source: "system",
      conversationKey: place.conversationKey,
      conversationId: place.conversationId ?? null,
      threadId: place.threadId ?? null,
      workspaceId: place.workspaceId ?? null,
      botId: place.botId ?? null,
      runId,
      dataJson: data,
      // AgentEventRecord exposes metadata, not data: a host record's facts go in both (hostRecordValues).
      metadataJson: data,
      createdAt: Date.now(),
    },
    { name: sql`${DROPS}`, query: counts },
    guard,
    sql`ON CONFLICT (${sql.identifier("event_id")}) DO NOTHING`,
    sql`${e.seq}`,
  );
  return [statement];
}

/** SQL counting the drops a run's ledger holds: its host warnings naming a result, but for a result of an unknown type (ignored, not dropped: no audit). */
export function ledgerDrops(runId: string): SQL {
  const e = runEvent;
  return sql`(SELECT COUNT(*) FROM ${e} WHERE ${e.runId} = ${runId} AND ${e.origin} = 'host' AND ${e.type} = 'host.warning' AND json_type(${e.dataJson}, '$.ledger_seq') = 'integer' AND json_extract(${e.dataJson}, '$.code') IS NOT ${UNKNOWN_TYPE_WARNING})`;
}
