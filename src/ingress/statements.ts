import { and, desc, eq, max, sql } from "drizzle-orm";
import { compiled, param } from "../db/compiled";
import { insertWhere } from "../db/guarded";
import { agent, eventLog, run, transcript } from "../db/schema";
import { acceptedHere } from "../stores/event-log";
import { chosenAgentId, chosenDisposition } from "../stores/binding-resolution";

/**
 * The ingress batch's own statements, compiled once (src/db/compiled.ts).
 * Their placeholders are the EventLog columns, `acceptId` (this attempt),
 * `runId` (minted in case an agent binds) and the resolution's `bind*` values.
 */

/** The EventLog row, with the agent the same transaction resolves; nothing on a repeated event_id. */
export const eventInsert = compiled((db) =>
  db
    .insert(eventLog)
    .values({
      eventId: param("eventId"),
      eventType: param("eventType"),
      eventTime: param("eventTime"),
      source: param("source"),
      sourceEventType: param("sourceEventType"),
      workspaceId: param("workspaceId"),
      botId: param("botId"),
      conversationKey: param("conversationKey"),
      conversationId: param("conversationId"),
      threadId: param("threadId"),
      actorType: param("actorType"),
      actorId: param("actorId"),
      actorName: param("actorName"),
      subjectType: param("subjectType"),
      subjectId: param("subjectId"),
      inputJson: param("inputJson"),
      inputSummary: param("inputSummary"),
      dataJson: param("dataJson"),
      rawRef: param("rawRef"),
      runId: sql`CASE WHEN ${chosenDisposition()} = 'bound' THEN ${param("runId")} END`,
      // An `unaddressed` event names the agent that left it so (its trigger_policy), as a bound one names its own.
      agentId: chosenAgentId(),
      disposition: chosenDisposition(),
      acceptId: param("acceptId"),
      metadataJson: param("metadataJson"),
      fingerprint: param("fingerprint"),
      messageRef: param("messageRef"),
      createdAt: param("createdAt"),
    })
    .onConflictDoNothing(),
);

/** The agent the EventLog row (written earlier in the batch) records: resolved once, not again per statement. */
const recordedAgentId = () => sql`(SELECT ${eventLog.agentId} FROM ${eventLog} WHERE ${eventLog.eventId} = ${param("eventId")})`;

/** The run the EventLog row (written earlier in the batch) names: none when no agent binds, or it leaves the event unaddressed. */
const recordedRunId = () => sql`(SELECT ${eventLog.runId} FROM ${eventLog} WHERE ${eventLog.eventId} = ${param("eventId")})`;

/** The run row, only when this attempt wrote the event and an agent takes it. */
export const runInsert = compiled((db) =>
  insertWhere(
    db,
    run,
    {
      runId: param("runId"),
      eventId: param("eventId"),
      conversationKey: param("conversationKey"),
      conversationId: param("conversationId"),
      threadId: param("threadId"),
      workspaceId: param("workspaceId"),
      botId: param("botId"),
      agentId: recordedAgentId(),
      runnerId: sql`(SELECT ${agent.runnerId} FROM ${agent} WHERE ${agent.agentId} = ${recordedAgentId()})`,
      // The agent as created (its state epoch; "" when it has none), for a repeat that hands this run over later.
      agentEpoch: sql`(SELECT COALESCE(${agent.stateEpoch}, '') FROM ${agent} WHERE ${agent.agentId} = ${recordedAgentId()})`,
      status: "created",
      // Where the history stood when the event arrived, kept for a repeat that hands this run over later.
      latestTranscriptSeq: sql`(SELECT COALESCE(MAX(${transcript.seq}), 0) FROM ${transcript} WHERE ${transcript.conversationKey} = ${param("conversationKey")})`,
      createdAt: param("createdAt"),
    },
    sql`${acceptedHere()} AND ${recordedRunId()} IS NOT NULL`,
  ),
);

/** The event as recorded (this attempt's, or the first one's for a repeat). */
export const recordedEvent = compiled((db) =>
  db
    .select({ seq: eventLog.seq, acceptId: eventLog.acceptId, runId: eventLog.runId, disposition: eventLog.disposition, conversationKey: eventLog.conversationKey, fingerprint: eventLog.fingerprint })
    .from(eventLog)
    .where(eq(eventLog.eventId, param("eventId"))),
);

/**
 * The user transcript item of the event, if it has one. An event id used again once retention removed its EventLog
 * row is recorded afresh, while retention may keep the first one's item (its conversation's newest): the newest
 * item of the id in this conversation is the event's own.
 */
export const userItemSeq = compiled((db) =>
  db
    .select({ seq: transcript.seq })
    .from(transcript)
    .where(and(eq(transcript.eventId, param("eventId")), eq(transcript.conversationKey, param("conversationKey")), eq(transcript.role, "user")))
    .orderBy(desc(transcript.seq))
    .limit(1),
);

/** The conversation's newest transcript item: the history an event without a user item of its own comes after. */
export const latestTranscriptSeq = compiled((db) =>
  db
    .select({ seq: max(transcript.seq) })
    .from(transcript)
    .where(eq(transcript.conversationKey, param("conversationKey"))),
);
