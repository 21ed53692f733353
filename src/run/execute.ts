import { writeAll, type Db } from "../db/client";
import { and, eq, gte, lte, sql } from "drizzle-orm";
import { artifact, eventLog, runEvent } from "../db/schema";
import { mayHaveApplied } from "../db/executor";
import { retryingRefused } from "../db/refused-retry";
import type { Config } from "../env";
import { artifactExpiry, artifactR2Key } from "../artifacts/policy";
import { base64ToBytes } from "../lib/base64";
import { headOf } from "../lib/text";
import { sha256Hex } from "../lib/crypto";
import { runnerClient } from "../runner/client";
import { RUN_ENDED, RunnerCallError } from "../runner/errors";
import { hostRecordValues, placeOfRun } from "../stores/event-log";
import { dropAuditInsert, unauditedDropsInsert } from "./drop-records";
import { RunEndUnwritten } from "./end-unwritten";
import { removeUnnamedBlobs } from "./unnamed-blobs";
import { runsStore, type LedgerEntry, type RunOutcome } from "../stores/runs";
import { stateStore } from "../stores/state";
import { stateCap } from "../stores/data-caps";
import { stateWritesWithinCaps } from "./state-caps";
import { trailingItems, transcriptStatements } from "./transcript-writes";
import { whileRunning } from "../stores/while-running";
import { insertWhere } from "../db/guarded";
import { buildRunContext, type StateRead } from "./context";
import type { HistoryBefore } from "./history-before";
import { artifactReaderOf, type RunJob } from "./job";
import { RunArtifactRefs } from "./artifact-refs";
import { logRunEnd, type RunEndFacts } from "./end-log";
import type { ResultBatch } from "./result-batch";
import { ResultProcessor } from "./results";
import type { LedgerSequence } from "./ledger-sequence";
import type { WriteBudget } from "../lib/write-budget";
import { HeldResults } from "./held-results";
import { apartInBatch, auditsOf, droppedWithWarning, splitLedgerWrites } from "./ledger-writes";
import { BlobPuts } from "./blob-put";
import type { AuthorizationSnapshot } from "./snapshot";
import type { RunnerEndpoint } from "./claim";
import { agentConfigSlot, runnerServiceSlot } from "../stores/secret-slots";
import { isSealed, openValues } from "../lib/secret-box";
import { SentSecrets } from "./sent-secrets";

export interface ExecuteDeps {
  db: Db;
  artifacts: R2Bucket;
  config: Config;
  job: RunJob;
  snapshot: AuthorizationSnapshot;
  state: StateRead;
  /** Whether the run has history before its event, as read with its claim. */
  historyBefore?: HistoryBefore;
  token: string;
  /** Where to call the runner, as read when the run was claimed, or why it cannot be called (then it never is). */
  runner: RunnerEndpoint | RunnerCallError;
  signal: AbortSignal;
  publish: (entries: LedgerEntry[]) => void;
  /** The run's ledger numbering, shared with the Host API's ledger records. */
  ledgerSequence?: LedgerSequence;
  /** The run's state writes, shared with its `state.set` calls: one RUN_MAX_STATE_UPDATES for both. */
  stateWrites?: WriteBudget;
  /** The runner's stream is over (its terminal result read, or it broke): from now on the run can only end; its Host API calls still in flight are stopped. */
  onStreamEnd?: () => void;
  /** The messages its `steering.pull` calls took in so far (its session counts them), for its end's log line. */
  steered?: () => number;
}


/**
 * The values of the agent's secret runner_config fields (typed secret by its runner, or stored sealed), as opened:
 * whatever they hold (a number or an object stored before its runner called the field secret, masked all the same).
 */
function secretConfigValues(job: RunJob, opened: Record<string, unknown>): unknown[] {
  const secret = new Set(job.runner.secretFields ?? []);
  return Object.entries(opened).flatMap(([name, value]) => (secret.has(name) || isSealed(job.agent.runnerConfig[name]) ? [value] : []));
}

/** How long the run's end waits for its stopped Host API calls to record how they ended. */
const HOST_CALLS_WIND_DOWN_MS = 1_000;

/**
 * Of the entries of a write that got no answer (perhaps applied), those the ledger holds. Best effort: unreadable,
 * none (the ledger still has them for a replay).
 */
async function recordedOf(db: Db, runId: string, entries: LedgerEntry[]): Promise<LedgerEntry[]> {
  if (!entries.length) return [];
  const seqs = entries.map((e) => e.seq);
  const range = and(eq(runEvent.runId, runId), gte(runEvent.seq, Math.min(...seqs)), lte(runEvent.seq, Math.max(...seqs)));
  const rows = await db.select({ seq: runEvent.seq }).from(runEvent).where(range).all().catch(() => []);
  const held = new Set(rows.map((r) => r.seq));
  return entries.filter((e) => held.has(e.seq));
}

/**
 * A batch's rows to write: its leading ledger rows, written first in parts of their own (each with the audits of the
 * drops it holds), then the rest in one write.
 */
interface BatchWrites {
  leading: { statements: unknown[]; entries: LedgerEntry[] }[];
  statements: unknown[];
  /** The keys of the blobs stored, which only rows of `statements` name. */
  blobs: string[];
}

/**
 * Store the batch's blobs (R2) and return the rows to write (one libSQL round trip, or a few for many ledger rows:
 * ledger-writes.ts), with the keys of the blobs stored. A blob R2 will not store (tried again a few times: blob-put.ts) costs only its own result (dropped, the
 * host's warning saying why): the rest of the batch, held over up to RUN_WRITE_INTERVAL_MS (deltas, a message, state,
 * other artifacts), is written all the same.
 */
async function batchStatements(deps: ExecuteDeps, batch: ResultBatch, refs: RunArtifactRefs, processor: ResultProcessor, puts: BlobPuts): Promise<BatchWrites> {
  const { db, job } = deps;
  const statements = [];
  // References first, a database read: failing, it leaves no blob put below that no row would name.
  // Dropped before the batch's ledger and audits are written: its warning and audit name the entry, as any dropped result's.
  await refs.check(batch.artifactReferences.map((r) => r.ref.artifact_id));
  for (const { ref, recorded } of batch.artifactReferences) {
    const refusal = refs.refusal(ref.artifact_id);
    if (refusal) processor.refuseReference(batch, recorded, ref.artifact_id, refusal);
  }
  const put: string[] = [];
  for (const a of batch.inlineArtifacts) {
    const bytes = base64ToBytes(a.contentBase64);
    const r2Key = artifactR2Key(a.ref.artifact_id);
    const refused = await puts.put(r2Key, bytes, { httpMetadata: a.ref.mime_type ? { contentType: a.ref.mime_type } : undefined });
    if (refused) {
      // No row, so no item may name it (a message of this batch that carried it included).
      refs.unstored([a.ref.artifact_id], "R2 did not store it");
      const why = headOf(refused.err instanceof Error ? refused.err.message : String(refused.err), 200);
      const tries = refused.attempts > 1 ? `, ${refused.attempts} attempts` : "";
      processor.refuseUnstored(batch, a.entry, a.ref.artifact_id, `its content could not be stored (${why}${tries})`);
      continue;
    }
    put.push(r2Key);
    a.ref.size_bytes = bytes.length;
    refs.stored(a.ref);
    const digest = await sha256Hex(bytes);
    a.recorded.sha256 = digest;
    const now = Date.now();
    statements.push(
      insertWhere(db, artifact, {
        artifactId: a.ref.artifact_id,
        artifactType: a.ref.artifact_type,
        mimeType: a.ref.mime_type ?? null,
        name: a.ref.name ?? null,
        sizeBytes: bytes.length,
        sha256: digest,
        source: "runner",
        conversationKey: job.conversationKey,
        conversationId: job.conversation.conversation_id ?? null,
        runId: job.runId,
        runnerId: job.runner.runnerId,
        r2Key,
        metadataJson: JSON.stringify(a.metadata),
        createdAt: now,
        expiresAt: artifactExpiry(deps.config, now),
      }, whileRunning(job.runId)),
    );
  }
  // State writes past their scopes' caps are dropped before the ledger is split, their warnings among its entries.
  const cap = stateCap(deps.config);
  const { kept, refused } = await stateWritesWithinCaps(db, batch.stateWrites, cap);
  for (const r of refused) processor.refuseStateWrite(batch, r.write.recorded, r.message, r.facts);
  const runs = runsStore(db);
  const ledger = splitLedgerWrites(batch.ledger, apartInBatch(batch.ledger), droppedWithWarning);
  // A drop's audit goes with its result and warning (auditsOf); the rest, the others.
  const leading = ledger.leading.map((entries) => ({ entries, audits: auditsOf(batch.audits, entries) }));
  const auditedApart = new Set(leading.flatMap((part) => part.audits));
  // Every row of the batch only while the run is running: a write of it that lands after the run's end (unanswered,
  // applied late) writes nothing, so what the end counted (result_count, the drops without an audit: drop-records.ts),
  // what its followers were given and the transcript its reply ended with stay what the database holds.
  statements.push(...runs.ledgerInserts(ledger.rest, true));
  statements.push(...transcriptStatements(db, job.runId, batch.transcriptItems, refs));
  const state = stateStore(db);
  const owner = { runnerId: job.runner.runnerId, agentId: job.agent.agentId, agentEpoch: job.agent.stateEpoch ?? null };
  for (const w of kept) statements.push(state.setStatement(w.scopeKey, w.key, owner, w.scope, w.valueJson, cap, job.runId));
  for (const audit of batch.audits) if (!auditedApart.has(audit)) statements.push(dropAuditInsert(db, job.runId, audit));
  const parts = leading.map(({ entries, audits }) => ({ statements: [...runs.ledgerInserts(entries, true), ...audits.map((a) => dropAuditInsert(db, job.runId, a))], entries }));
  return { leading: parts, statements, blobs: put };
}

/**
 * A batch's rows, written. Refused, it is tried again a few times (retryingRefused), unless a constraint refused it
 * (it would again); then the blobs only its rows would name are removed. Unanswered, it may have been applied: not
 * tried again, and its blobs are kept, as they may be named (until the run's end is recorded: unnamed-blobs.ts).
 */
async function writeNaming(deps: ExecuteDeps, statements: unknown[], blobs: string[]): Promise<void> {
  try {
    await retryingRefused(() => writeAll(deps.db, statements), deps.config.DB_WRITE_RETRY_PAUSES_MS);
  } catch (err) {
    if (blobs.length && !mayHaveApplied(err)) await deps.artifacts.delete(blobs).catch(() => {});
    throw err;
  }
}

/** How far a batch's writes got before one failed (writeInParts). */
interface WriteProgress {
  /** The entries of the leading parts written. */
  entries: number;
  /** Whether the write of the rest was made: not when a leading part failed, which leaves the rest's rows unsent. */
  restSent: boolean;
}

/**
 * A batch's writes in order, its leading ledger parts first (one refused leaves no blob of the batch: no row names one
 * yet). A write that fails leaves the parts before it written: their entries go to followers at once, as a replay
 * gives them, and `progress` says what was written. A leading part unanswered (perhaps applied) leaves the rest
 * unsent all the same: its blobs, which only the rest's rows name, are removed as a refusal's are.
 */
async function writeInParts(deps: ExecuteDeps, { leading, statements, blobs }: BatchWrites, progress: WriteProgress = { entries: 0, restSent: false }): Promise<void> {
  let done = 0;
  try {
    for (; done < leading.length; done++) await writeNaming(deps, leading[done].statements, blobs);
    progress.restSent = true;
    await writeNaming(deps, statements, blobs);
  } catch (err) {
    const written = leading.slice(0, done).flatMap((part) => part.entries);
    progress.entries = written.length;
    if (!progress.restSent && mayHaveApplied(err) && blobs.length) await deps.artifacts.delete(blobs).catch(() => {});
    if (written.length) deps.publish(written);
    throw err;
  }
}

/**
 * Runs one event through its runner: builds the context, calls the runner,
 * applies each chunk of results as one batch, and writes the outcome. Never
 * throws for runner misbehaviour: that ends this run as failed and nothing else.
 */
export async function executeRun(deps: ExecuteDeps): Promise<RunOutcome> {
  const { db, job, snapshot, config } = deps;
  const sent = new SentSecrets(deps.token);
  const processor = new ResultProcessor({
    runId: job.runId,
    runnerId: job.runner.runnerId,
    eventId: job.event.event_id,
    place: placeOfRun(job),
    stateScopes: snapshot.stateScopes,
    stateScopesUnidentified: snapshot.stateScopesUnidentified,
    ledgerSequence: deps.ledgerSequence,
    maxArtifacts: config.RUN_MAX_ARTIFACTS,
    maxMessages: config.RUN_MAX_MESSAGES,
    maxStateUpdates: config.RUN_MAX_STATE_UPDATES,
    stateWrites: deps.stateWrites,
    maxResults: config.RUN_MAX_RESULTS,
    scrub: sent.scrub,
  });

  // Its refusals quote the ids the runner named.
  const artifactRefs = new RunArtifactRefs(db, artifactReaderOf(job), sent.scrub);

  let failure: unknown;
  let runnerDone = false;
  // When the runner was called (never, for a run that fails before): its end's log line tells the wait and the run apart.
  let calledAt: number | undefined;
  // What is held when reading stops (the terminal result's batch among it) is written together with the outcome: one round trip fewer.
  let last: BatchWrites & { ledger: LedgerEntry[] } = { leading: [], statements: [], ledger: [], blobs: [] };
  // A batch whose write got no answer may have been applied: what of it the ledger holds goes to followers with the end.
  const unanswered: LedgerEntry[] = [];
  // The ledger entry marking a batch whose whole write was sent and got no answer (its rest's first): whether it was
  // applied the end's own write asks (trailingItems, finishStatement), as it cannot land after the end (whileRunning).
  let undecided: LedgerEntry | undefined;
  // Its blobs: kept while it may land (removeUnnamedBlobs once the end is recorded).
  let undecidedBlobs: string[] = [];
  const held = new HeldResults(config.RUN_WRITE_INTERVAL_MS, config.RUNNER_MAX_LINE_BYTES);
  const puts = new BlobPuts(deps.artifacts, { signal: deps.signal, deadlineAt: snapshot.deadlineAt });
  const statementsOf = async (batch: ResultBatch | null) => {
    if (!batch) return last;
    const made = await batchStatements(deps, batch, artifactRefs, processor, puts).catch((err: unknown) => {
      // Its references unchecked (the database refused the read), nothing of it is written: its drops' audits neither.
      processor.notWritten(batch);
      throw err;
    });
    return { ...made, ledger: batch.ledger };
  };
  const write = async (batch: ResultBatch | null) => {
    if (!batch) return;
    const progress: WriteProgress = { entries: 0, restSent: false };
    const made = await statementsOf(batch);
    await writeInParts(deps, made, progress).catch((err: unknown) => {
      // Refused, or never sent (a leading part before it got no answer), the batch's inline artifacts have no row (their
      // blobs are removed): no later item names them.
      if (!mayHaveApplied(err) || !progress.restSent) {
        artifactRefs.unstored(batch.inlineArtifacts.map((a) => a.ref.artifact_id));
        processor.notWritten(batch);
      }
      if (mayHaveApplied(err)) unanswered.push(...batch.ledger.slice(progress.entries)); // its leading parts written are published already
      if (mayHaveApplied(err) && progress.restSent) [undecided, undecidedBlobs] = [batch.ledger[progress.entries], made.blobs];
      throw err;
    });
    deps.publish(batch.ledger);
  };
  let stream: AsyncIterator<string[]> | undefined;
  let reading: Promise<IteratorResult<string[]>> | undefined;
  try {
    // Secret config fields are sealed at rest (and in the queued job): opened only for the runner's request. Unopenable
    // (here or the service's secret below), the host's failure is not retryable: every run fails so until SECRETS_KEY is fixed.
    const runnerConfig = await openValues(db.secrets, job.agent.runnerConfig, agentConfigSlot({ agentId: job.agent.agentId, runnerId: job.runner.runnerId }, job.runner.baseUrl)).catch((err: Error) => {
      throw new RunnerCallError("host.internal_error", `the agent's runner_config cannot be used: ${err.message}`, { cause: err });
    });
    sent.add(() => secretConfigValues(job, runnerConfig));
    const context = buildRunContext({ job: { ...job, agent: { ...job.agent, runnerConfig } }, snapshot, token: deps.token, state: deps.state, historyBefore: deps.historyBefore, hostVersion: config.HOST_VERSION });
    const body = JSON.stringify({ runner_id: job.runner.runnerId, runner_name: job.runner.runnerName, context });
    if (deps.runner instanceof RunnerCallError) throw deps.runner;
    // Sealed at rest: opened only to sign the request. Unopenable, the runner is not called at all.
    const secret = await db.secrets.open(deps.runner.secret, runnerServiceSlot({ serviceId: job.runner.serviceId, baseUrl: deps.runner.baseUrl })).catch((err: Error) => {
      throw new RunnerCallError("host.internal_error", `the runner service's secret cannot be used: ${err.message}`, { cause: err });
    });
    const target = { baseUrl: deps.runner.baseUrl, runnerName: job.runner.runnerName, secret };
    const limits = { maxLineBytes: config.RUNNER_MAX_LINE_BYTES, maxStreamBytes: config.RUNNER_MAX_STREAM_BYTES };
    calledAt = Date.now();
    stream = runnerClient.run(target, body, { runId: job.runId, signal: deps.signal, scrub: sent.scrub, ...limits });
    for (;;) {
      reading ??= stream.next();
      const read = await held.readOrDue(reading);
      // What is held fell due while the runner was quiet: written now, then the same read is awaited again.
      if (read === "due") {
        await write(held.take());
        continue;
      }
      reading = undefined;
      if (read.done) break;
      const payloads = read.value;
      // Stopped (a cancel, the deadline) before these were applied, though read already: the run ends as it was stopped
      // (a cancel was answered 202), not with a terminal result applied after it.
      if (deps.signal.aborted && deps.signal.reason instanceof RunnerCallError && deps.signal.reason !== RUN_ENDED) throw deps.signal.reason;
      if (deps.ledgerSequence?.callsInFlight && processor.endsRun(payloads)) {
        // The runner ends its run with Host API calls in flight (a tool call): they are stopped and record how they
        // ended before its end is numbered, which stays the ledger's last entry.
        runnerDone = true;
        deps.onStreamEnd?.();
        await deps.ledgerSequence.closeToHost(HOST_CALLS_WIND_DOWN_MS);
      }
      const batch = processor.process(payloads);
      held.add(batch, payloads.reduce((n, p) => n + p.length, 0));
      if (batch.terminal) {
        runnerDone = true;
        // From its terminal result on, the Host API records nothing more: the run's end stays its ledger's last entry.
        void deps.ledgerSequence?.closeToHost();
        // And a cancel or the deadline changes nothing: the run ends as its runner said (the cancel is told so).
        deps.onStreamEnd?.();
        break;
      }
      // A line that fails the run: what came before it is written with the run's end.
      if (batch.error) throw batch.error;
      if (held.due) await write(held.take());
    }
    last = await statementsOf(held.take());
  } catch (err) {
    // An abort (deadline, cancel) may surface as any error from fetch; its reason says why. Once the runner is done, the
    // signal was aborted only to say so: a failure then is the host's own.
    failure = !runnerDone && deps.signal.aborted && deps.signal.reason instanceof RunnerCallError ? deps.signal.reason : err;
    // Results read before it stopped are recorded with its end, as if written before it; unless their references cannot be checked (the database away).
    last = await statementsOf(held.take()).catch(() => last);
  } finally {
    // A read still pending (the write made while waiting for it failed) ends with the stream, which the run's end aborts.
    if (reading) void stream?.return?.(undefined).catch(() => {});
    else await stream?.return?.(undefined).catch(() => {});
  }
  deps.onStreamEnd?.();
  // The end is the ledger's last entry: Host API calls just stopped may record how they ended, then nothing more.
  await deps.ledgerSequence?.closeToHost(HOST_CALLS_WIND_DOWN_MS);

  const { outcome, ledger, transcriptItems } = processor.finish(failure);
  const runs = runsStore(db);
  const statements: unknown[] = [...last.statements, ...(await trailingItems(db, job, transcriptItems, artifactRefs, undecided))];
  statements.push(...runs.ledgerInserts(ledger, true));
  // After every ledger row of this write: the end counts the runner's results the ledger holds (result_count); after
  // an undecided batch, its message is the last the transcript holds (the batch's, or the one before it).
  // Its line is timed to the end as recorded, whenever it is logged (a write found applied unanswered: later).
  const endedAt = Date.now();
  statements.push(runs.finishStatement(job.runId, outcome, { messageRecorded: undecided !== undefined, endedAt }));
  if (outcome.status !== "completed") {
    // Right after the end, only if it ended the run (`changes()` counts the end's update): this write landing after the
    // host ended the run (its answer never came) adds no second record of how it ended.
    const record = { eventType: "run.failed", ...placeOfRun(job), runId: job.runId, data: { run_id: job.runId, runner_id: job.runner.runnerId, status: outcome.status, code: outcome.errorCode, error: outcome.errorMessage } };
    statements.push(insertWhere(db, eventLog, hostRecordValues(record), sql`changes() = 1`));
  }
  // After every audit of this write: the drops without one, counted by the write itself (an unanswered write's audits
  // are counted as what it did). Right after the end's update, or the run.failed record written on it (`changes()`):
  // only if this write ended the run, as one landing after the host's end adds nothing that end did not count.
  statements.push(...unauditedDropsInsert(db, { runId: job.runId, runnerId: job.runner.runnerId, place: placeOfRun(job) }, processor.dropsSeen, { endedHere: true }));
  const facts: RunEndFacts = { endedBy: "run", calledAt, resultsRead: processor.resultsRead, steered: deps.steered?.(), cause: failure, endedAt };
  // Held ledger rows past one write's share go first, on their own; the rest is written with the end, in one write.
  await writeInParts(deps, { leading: last.leading, statements, blobs: last.blobs }).catch((err: unknown) => {
    // The host ends the run instead (endRunAfterHostFailure), counting its drops as this end would have; should this
    // end turn out applied though unanswered, the host logs its line.
    throw new RunEndUnwritten(err, processor.dropsSeen, [...undecidedBlobs, ...last.blobs], { outcome, facts });
  });
  logRunEnd(job, outcome, facts);
  // Host API records unanswered too: those applied before the end are held; one landing after it writes nothing.
  deps.publish([...(await recordedOf(db, job.runId, [...unanswered, ...(deps.ledgerSequence?.unansweredHostRecords ?? [])])), ...last.ledger, ...ledger]);
  // Ended, the batch whose write got no answer can no longer land: its blobs no row names now are removed.
  await removeUnnamedBlobs(db, deps.artifacts, job.runId, undecidedBlobs);
  return outcome;
}
