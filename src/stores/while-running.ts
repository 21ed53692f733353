import { sql, type Placeholder, type SQL } from "drizzle-orm";
import { run } from "../db/schema";

/**
 * Holds while the run is running: a write of the run's so guarded that lands after the run's end (held on the wire,
 * answered too late or not at all, applied later still) adds nothing past it, which its end, its followers and its
 * counts (result_count, the drops without an audit) would never reflect.
 */
export const whileRunning = (runId: string | SQL | Placeholder): SQL => sql`EXISTS (SELECT 1 FROM ${run} WHERE ${run.runId} = ${runId} AND ${run.status} = 'running')`;
