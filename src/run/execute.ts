import type { Db } from "../db/client";
import { artifact } from "../db/schema";
import type { Config } from "../env";
import { sha256Hex } from "../lib/crypto";
import type { EnabledStateSnapshot, StateScope } from "../protocol/context";
import { runnerClient } from "../runner/client";
import { RunnerCallError } from "../runner/errors";
import { hostRecordInsert } from "../stores/event-log";
import { runsStore, type LedgerEntry, type RunOutcome } from "../stores/runs";
import { SEEDED_CONVERSATION_ID_KEY, stateStore } from "../stores/state";
import { transcriptInsert } from "../stores/transcript";
import { buildRunContext } from "./context";
import type { RunJob } from "./job";
import { ResultProcessor, type ResultBatch } from "./results";
import type { AuthorizationSnapshot } from "./snapshot";

export interface ExecuteDeps {
  db: Db;
  artifacts: R2Bucket;
  config: Config;
  job: RunJob;
  snapshot: AuthorizationSnapshot;
  state: EnabledStateSnapshot;
  token: string;
  signal: AbortSignal;
  publish: (entries: LedgerEntry[]) => void;
}

function decodeBase64(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

type BatchItems = Parameters<Db["batch"]>[0];

/**
 * queued → running, the §9 seed of `external.conversation_id`, and the state
 * snapshot of the run's enabled scopes (only those), in one round trip. Null
 * when another trigger already took the run.
 */
export async function claimRun(db: Db, job: RunJob, snapshot: AuthorizationSnapshot): Promise<EnabledStateSnapshot | null> {
  const scopes = Object.entries(snapshot.stateScopes) as [StateScope, string][];
  const state = stateStore(db);
  const conversationScope = snapshot.stateScopes.conversation;
  // Insert-if-absent, so the seed is idempotent and never overwrites the runner's own value.
  const seeds = conversationScope && snapshot.conversationId
    ? [state.seedStatement(conversationScope, SEEDED_CONVERSATION_ID_KEY, job.runner.runnerId, "conversation", JSON.stringify(snapshot.conversationId))]
    : [];
  // One query per scope so that a scope with many keys cannot crowd out another's.
  const reads = scopes.map(([, key]) => state.scopeSnapshotQuery(key));
  // A dynamic list has no tuple type for batch(); each result is read back by position below.
  const results = (await db.batch([runsStore(db).markRunningStatement(job.runId), ...seeds, ...reads] as unknown as BatchItems)) as readonly unknown[];
  if ((results[0] as unknown[]).length !== 1) return null;
  const rowsOf = results.slice(1 + seeds.length) as { key: string; valueJson: string }[][];
  return Object.fromEntries(scopes.map(([scope], i) => [scope, state.snapshotOf(rowsOf[i])]));
}

/** Store the batch's blobs (R2) and return the rows to write, for one libSQL round trip. */
async function batchStatements(deps: ExecuteDeps, batch: ResultBatch): Promise<unknown[]> {
  const { db, job } = deps;
  const statements = [];
  for (const a of batch.inlineArtifacts) {
    const bytes = decodeBase64(a.contentBase64);
    const r2Key = `artifacts/${a.ref.artifact_id}`;
    await deps.artifacts.put(r2Key, bytes, { httpMetadata: a.ref.mime_type ? { contentType: a.ref.mime_type } : undefined });
    a.ref.size_bytes = bytes.length;
    statements.push(
      db.insert(artifact).values({
        artifactId: a.ref.artifact_id,
        artifactType: a.ref.artifact_type,
        mimeType: a.ref.mime_type ?? null,
        name: a.ref.name ?? null,
        sizeBytes: bytes.length,
        sha256: await sha256Hex(bytes),
        source: "runner",
        conversationKey: job.conversationKey,
        conversationId: job.conversation.conversation_id ?? null,
        runId: job.runId,
        runnerId: job.runner.runnerId,
        r2Key,
        metadataJson: JSON.stringify(a.metadata),
        createdAt: Date.now(),
      }),
    );
  }
  if (batch.ledger.length) statements.push(runsStore(db).ledgerInsert(batch.ledger));
  for (const item of batch.transcriptItems) statements.push(transcriptInsert(db, item));
  const state = stateStore(db);
  for (const w of batch.stateWrites) statements.push(state.setStatement(w.scopeKey, w.key, job.runner.runnerId, w.scope, w.valueJson));
  for (const audit of batch.audits) statements.push(hostRecordInsert(db, audit));
  return statements;
}

async function writeAll(db: Db, statements: unknown[]) {
  // The tuple type drizzle wants for batch() cannot be spelled for a dynamic list; the items are all batchable queries.
  if (statements.length) await db.batch(statements as unknown as BatchItems);
}

/**
 * Runs one event through its runner: builds the context, calls the runner,
 * applies each chunk of results as one batch, and writes the outcome. Never
 * throws for runner misbehaviour: that ends this run as failed and nothing else.
 */
export async function executeRun(deps: ExecuteDeps): Promise<RunOutcome> {
  const { db, job, snapshot, config } = deps;
  const processor = new ResultProcessor({
    runId: job.runId,
    runnerId: job.runner.runnerId,
    eventId: job.event.event_id,
    conversationKey: job.conversationKey,
    conversationId: job.conversation.conversation_id,
    threadId: job.conversation.thread_id,
    stateScopes: snapshot.stateScopes,
  });

  let failure: unknown;
  // The last batch (terminal result) is written together with the outcome: one round trip fewer.
  let last: { statements: unknown[]; ledger: LedgerEntry[] } = { statements: [], ledger: [] };
  try {
    const context = buildRunContext({ job, snapshot, token: deps.token, state: deps.state, hostVersion: config.HOST_VERSION });
    const body = JSON.stringify({ runner_id: job.runner.runnerId, runner_name: job.runner.runnerName, context });
    const target = { baseUrl: job.runner.baseUrl, runnerName: job.runner.runnerName, secret: job.runner.secret };
    const limits = { maxLineBytes: config.RUNNER_MAX_LINE_BYTES, maxStreamBytes: config.RUNNER_MAX_STREAM_BYTES };
    for await (const payloads of runnerClient.run(target, body, { runId: job.runId, signal: deps.signal, ...limits })) {
      const batch = processor.process(payloads);
      const statements = await batchStatements(deps, batch);
      if (batch.terminal && !batch.error) {
        last = { statements, ledger: batch.ledger };
        break;
      }
      await writeAll(db, statements);
      deps.publish(batch.ledger);
      if (batch.error) throw batch.error;
    }
  } catch (err) {
    // An abort (deadline, cancel) may surface as any error from fetch; its reason says why.
    failure = deps.signal.aborted && deps.signal.reason instanceof RunnerCallError ? deps.signal.reason : err;
  }

  const { outcome, ledger } = processor.finish(failure);
  const runs = runsStore(db);
  const statements: unknown[] = [...last.statements];
  if (ledger.length) statements.push(runs.ledgerInsert(ledger));
  statements.push(runs.finishStatement(job.runId, outcome));
  if (outcome.status !== "completed") {
    statements.push(
      hostRecordInsert(db, {
        eventType: "run.failed",
        conversationKey: job.conversationKey,
        conversationId: job.conversation.conversation_id,
        threadId: job.conversation.thread_id,
        runId: job.runId,
        data: { run_id: job.runId, runner_id: job.runner.runnerId, status: outcome.status, code: outcome.errorCode, error: outcome.errorMessage },
      }),
    );
  }
  await writeAll(db, statements);
  deps.publish([...last.ledger, ...ledger]);
  return outcome;
}
