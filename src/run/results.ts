import { base64DecodedLength, parseResultPayload, STRICT_RESULT_TYPES, type AgentRunResult, type KnownResult } from "../protocol/results";
import type { ArtifactRef, Message } from "../protocol/common";
import { isBlankMessage } from "../protocol/common";
import { messageText, sameMessage } from "./message-text";
import { RunnerCallError, type RunFailureCode } from "../runner/errors";
import type { LedgerEntry, RunOutcome } from "../stores/runs";
import type { NewTranscriptItem } from "../stores/transcript";
import { newId } from "../lib/ids";
import { headOf } from "../lib/text";
import { LedgerSequence } from "./ledger-sequence";
import { roundedIntegerAt, roundedIntegerMessage } from "../lib/exact-json";
import { InlineArtifactIds } from "./inline-artifact-ids";
import type { ResultBatch } from "./result-batch";
import { ledgerDataOf, parseResultLine } from "./result-line";
import { SequenceCheck } from "./sequence-check";
import { DropAuditCount, OVER_LIMIT_WARNING, STATE_SCOPE_FULL_WARNING, UNKNOWN_TYPE_WARNING } from "./drop-audit-cap";
import { unavailableStateScope } from "./state-scope-refusal";
import { WriteBudget } from "../lib/write-budget";
import type { ResultProcessorInit } from "./result-processor-init";
import { MAX_UNKNOWN_TYPE_WARNINGS, TYPE_KEY_CHARS, UnknownTypeWarnings } from "./unknown-type-warnings";
import { quotedAsSent, type QuoteScrub } from "./sent-secrets";

/** Text streamed as deltas is kept up to what one message.completed line could carry; past it, none is (memory stays bounded). */
export const STREAMED_TEXT_MAX_CHARS = 1024 * 1024;

/**
 * Applies PROTOCOL §7 to a run's result stream: validation, sequence
 * de-duplication and gap warnings, and the host effect of each result. Pure:
 * it decides what to write; it writes nothing. Holds O(1) state per run.
 */
export class ResultProcessor {
  private readonly ledgerSeq: LedgerSequence;
  private readonly sequences = new SequenceCheck();
  /** Drops audited in EventLog so far: only a run's first are (drop-audit-cap.ts). */
  private readonly dropAudits = new DropAuditCount();
  /** Artifacts announced since the last message, by id, in announcement order (each once): the next message carries them. */
  private readonly pending = new Map<string, ArtifactRef>();
  /** The ids a runner gave its inline artifacts, to the ids the host stored them under: its messages name them by its own. */
  private readonly inlineIds = new InlineArtifactIds();
  /** The `artifact.created` results accepted so far (a reference then refused included): at most `maxArtifacts`. */
  private artifacts = 0;
  /** The messages accepted so far (`message.completed`, and those `run.completed` adds): at most `maxMessages`. */
  private messages = 0;
  /** State writes so far, the run's `state.set` calls included: at most `maxStateUpdates`. */
  private readonly stateWrites: WriteBudget;
  /** Result lines read so far, duplicates included: at most `maxResults` (the run's end line tells them: end-log.ts). */
  resultsRead = 0;
  private readonly unknownTypes = new UnknownTypeWarnings();
  private terminalResult: Extract<KnownResult, { type: "run.completed" | "run.failed" }> | null = null;
  /** Why the last terminal result sent was dropped (its payload invalid), for the failure of a stream that then ends without one. */
  private droppedTerminal: string | null = null;
  sawMessage = false;
  lastMessage: Message | undefined;
  /** The run's last message as each batch found it (a held batch is its first chunk's): one never written does not end as the run's message. */
  private readonly messageBefore = new WeakMap<ResultBatch, { message: Message | undefined }>();
  /** The text streamed as deltas since the last message (null once past STREAMED_TEXT_MAX_CHARS): what chat shows of an answer not completed yet. */
  private streamed: string | null = "";

  /** What the host's words quoting the runner's leave out (its run's secrets: ./sent-secrets.ts). */
  private readonly quote: QuoteScrub;

  constructor(private readonly init: ResultProcessorInit) {
    this.ledgerSeq = init.ledgerSequence ?? new LedgerSequence();
    this.stateWrites = init.stateWrites ?? new WriteBudget();
    this.quote = init.scrub ?? quotedAsSent;
  }

  get ended(): boolean {
    return this.terminalResult !== null;
  }

  process(payloads: string[]): ResultBatch {
    const batch: ResultBatch = { ledger: [], transcriptItems: [], stateWrites: [], inlineArtifacts: [], artifactReferences: [], audits: [], terminal: false };
    this.messageBefore.set(batch, { message: this.lastMessage });
    for (const payload of payloads) {
      if (this.terminalResult) break;
      try {
        this.one(payload, batch);
      } catch (err) {
        if (!(err instanceof RunnerCallError)) throw err;
        batch.error = err;
        break;
      }
    }
    batch.terminal = this.ended;
    return batch;
  }

  /**
   * The run's outcome once reading stopped, `error` being why it stopped early (if it did), and the item of artifacts
   * it announced that no message carried (a run cut short keeps them too).
   */
  finish(error?: unknown): { outcome: RunOutcome; ledger: LedgerEntry[]; transcriptItems: NewTranscriptItem[] } {
    const transcriptItems = this.trailingArtifacts();
    const fail = (status: RunOutcome["status"], code: RunFailureCode | string, message: string, retryable = false) => ({
      outcome: { status, errorCode: code, errorMessage: message, finalMessage: this.lastMessage },
      ledger: [...this.unwarnedUnknown(), this.entry("run.failed", { code, error: message, retryable }, "host")],
      transcriptItems,
    });
    if (error !== undefined) {
      // Anything else is the host's own failure (a write refused mid-run), not the event's: sent again, it may well run.
      const e = error instanceof RunnerCallError ? error : new RunnerCallError("host.internal_error", "the host failed while running", { cause: error, retryable: true });
      const status = e.code === "cancelled" ? "cancelled" : e.code === "deadline_exceeded" ? "timeout" : "failed";
      return fail(status, e.code, e.message, e.retryable);
    }
    const t = this.terminalResult;
    // One was sent but dropped: the failure says why, not that none came.
    if (!t) return fail("failed", "runner.stream_closed", `the result stream ended without ${this.droppedTerminal ? `a valid run.completed or run.failed (dropped, ${this.droppedTerminal})` : "run.completed or run.failed"}`);
    if (t.type === "run.failed") {
      // The runner's own words, kept as the run's error where others read it (an exception's text naming the URL it called).
      return {
        outcome: { status: "failed", errorCode: this.quote(t.data.code), errorMessage: this.quote(t.data.error), finalMessage: this.lastMessage },
        ledger: [],
        transcriptItems,
      };
    }
    if (!this.sawMessage) return fail("failed", "runner.no_output", "the run completed without producing any message");
    return {
      outcome: { status: "completed", finishReason: t.data.finish_reason, finalMessage: this.lastMessage },
      ledger: [],
      transcriptItems,
    };
  }

  /** For the run's end (drop-records.ts): the drops it saw, audited or not, those of writes never applied included. */
  get dropsSeen(): number {
    return this.dropAudits.seen;
  }

  /** The batch's rows were never written (refused, a read they needed refused, or a part before them unanswered) but for its parts written apart, which hold no message: the run's message is the one before the batch. */
  notWritten(batch: ResultBatch): void {
    const before = this.messageBefore.get(batch);
    if (before) this.lastMessage = before.message;
  }

  private entry(type: string, data: unknown, origin: "runner" | "host", runnerSequence?: number | null): LedgerEntry {
    return { runId: this.init.runId, seq: this.ledgerSeq.next(), type, data, runnerSequence: runnerSequence ?? null, origin, createdAt: Date.now() };
  }

  /**
   * Whether this chunk, processed next, would end the run as `process` would: a valid terminal result of this run, its
   * sequence seen neither before nor earlier in the chunk, with no line before it that fails the run. Parses the lines
   * apart from `process`, so only worth it when something waits on the answer.
   */
  endsRun(payloads: string[]): boolean {
    const inChunk = new Set<number>();
    for (const payload of payloads) {
      let result: AgentRunResult;
      try {
        result = parseResultLine(payload, this.init.runId, this.quote);
      } catch {
        return false; // a line that fails the run before any terminal result
      }
      const { type, data, sequence } = result;
      if (sequence != null && sequence >= 1) {
        // A duplicate is dropped, and the run goes on.
        if (this.sequences.seen(sequence) || inChunk.has(sequence)) continue;
        inChunk.add(sequence);
      }
      if ((type === "run.completed" || type === "run.failed") && parseResultPayload(type, data).kind === "ok") return true;
    }
    return false;
  }

  private warn(batch: ResultBatch, code: string, message: string, extra: Record<string, unknown> = {}) {
    batch.ledger.push(this.entry("host.warning", { code, message, ...extra }, "host"));
  }

  private one(payload: string, batch: ResultBatch) {
    const result = parseResultLine(payload, this.init.runId, this.quote);
    // Every line read counts, a duplicate's too: each may write a ledger row (its warning), up to the stream's byte limit.
    const maxResults = this.init.maxResults;
    if (++this.resultsRead > (maxResults ?? Infinity)) {
      throw new RunnerCallError("runner.too_many_results", `the run sent more than ${maxResults} results (RUN_MAX_RESULTS); those before were kept`);
    }
    let sequence = result.sequence ?? null;
    if (sequence !== null && sequence < 1) {
      this.warn(batch, "result.invalid_sequence", `sequence ${sequence} is not positive; the result is taken as unnumbered`, { sequence });
      sequence = null;
    }
    if (sequence !== null && !this.sequences.accept(sequence, (code, message, extra) => this.warn(batch, code, message, extra))) {
      // A terminal result dropped as a duplicate: a stream that then ends without one says so, as for an invalid one.
      if (result.type === "run.completed" || result.type === "run.failed") this.droppedTerminal = `${result.type}: duplicate sequence ${sequence}`;
      return;
    }

    // The count of unknown results not warned of comes before a terminal result: the run's end stays its ledger's last entry.
    if (result.type === "run.completed" || result.type === "run.failed") batch.ledger.push(...this.unwarnedUnknown());
    const recorded = this.entry(result.type, ledgerDataOf(payload, result.data), "runner", sequence);
    batch.ledger.push(recorded);
    const parsed = parseResultPayload(result.type, result.data, payload);
    if (parsed.kind === "unknown") {
      recorded.dropped = true;
      if (!this.unknownTypes.admit(result.type)) return;
      // The type is the runner's word (a debug print of a secret, say), and may be as long as its line: its head, scrubbed.
      const shown = `${this.quote(result.type, { max: TYPE_KEY_CHARS })}${result.type.length > TYPE_KEY_CHARS ? "…" : ""}`;
      return this.warn(batch, UNKNOWN_TYPE_WARNING, `unknown result type ${shown} ignored`, { sequence, ledger_seq: recorded.seq });
    }
    // Only strict payloads are dropped (§7): tool.call.* telemetry is loose, kept in the ledger as sent (it is acted on nowhere).
    if (parsed.kind === "invalid") {
      // zod's words quote the keys it refused (an unknown key, a record's key on a path): scrubbed before the cut.
      const issues = this.quote(parsed.issues);
      if (parsed.type === "run.completed" || parsed.type === "run.failed") this.droppedTerminal = headOf(`${parsed.type}: ${issues}`, 500);
      return STRICT_RESULT_TYPES.has(parsed.type) ? this.drop(batch, recorded, issues) : undefined;
    }
    // A whole number past what the value check can see (beyond 64 bits, read as a float) in what is stored (a state value,
    // an artifact's metadata): dropped, not stored rounded.
    const kept = parsed.result.type === "state.updated" ? "value" : parsed.result.type === "artifact.created" && parsed.result.data.metadata ? "metadata" : null;
    const rounded = kept ? roundedIntegerAt(payload, ["data", kept]) : null;
    // The digits quoted are the runner's.
    if (rounded) return this.drop(batch, recorded, `${kept}: ${roundedIntegerMessage(this.quote(rounded))}`);
    this.inlineIds.rename(parsed.result, recorded);
    this.apply(parsed.result, batch, recorded);
  }

  /** The warning counting the unknown results warned of by none since the last such count (none when there are none). */
  private unwarnedUnknown(): LedgerEntry[] {
    const suppressed = this.unknownTypes.takeUnwarned();
    if (!suppressed) return [];
    const message = `${suppressed} more results of unknown types were ignored without a warning each: a run's first ${MAX_UNKNOWN_TYPE_WARNINGS} of each type get one`;
    return [this.entry("host.warning", { code: UNKNOWN_TYPE_WARNING, message, sequence: null, ledger_seq: null, suppressed }, "host")];
  }

  /**
   * The result is recorded as sent but not acted on: `dropped` keeps delivery from showing it. `reason` and `facts` are
   * kept as given: what of them quotes the runner is scrubbed where it is quoted (this.quote), the host's own words and
   * facts never (a secret of a few characters would take them apart: "no c[redacted]tent").
   */
  private drop(batch: ResultBatch, recorded: LedgerEntry, reason: string, facts: Record<string, unknown> = {}, code?: string) {
    recorded.dropped = true;
    this.reportDrop(batch, recorded, reason, facts, code);
  }

  /**
   * A reference the executor could not attach (its lookup refused it: the run may not attach it), dropped like any
   * invalid result. `reason` quotes the id scrubbed already (RunArtifactRefs); the id named is the runner's word.
   */
  refuseReference(batch: ResultBatch, recorded: LedgerEntry, artifactId: string, reason: string) {
    // Never attached: not kept for the next message either, so a runner naming artifacts it may not attach fills no memory.
    this.pending.delete(artifactId);
    this.drop(batch, recorded, reason, { artifact_id: this.quote(artifactId) });
  }

  /** Inline content R2 would not store, dropped as a refused reference is: its id is the host's own (no quote). */
  refuseUnstored(batch: ResultBatch, recorded: LedgerEntry, artifactId: string, reason: string) {
    this.pending.delete(artifactId);
    this.drop(batch, recorded, reason, { artifact_id: artifactId }, "result.artifact_unstored");
  }

  /** A `state.updated` the executor found past its scope's cap (run/state-caps.ts): dropped like any refused result, its facts the cap and the usage. */
  refuseStateWrite(batch: ResultBatch, recorded: LedgerEntry, reason: string, facts: Record<string, unknown>) {
    this.drop(batch, recorded, reason, facts, STATE_SCOPE_FULL_WARNING);
  }

  /** A host warning in the ledger and an audit record in EventLog: what was dropped and why. */
  private reportDrop(batch: ResultBatch, recorded: LedgerEntry, reason: string, facts: Record<string, unknown> = {}, code = "result.invalid_payload") {
    const { type, seq: ledger_seq } = recorded;
    const sequence = recorded.runnerSequence ?? null;
    // `reason` and `facts` quote the runner scrubbed already (drop): the audit is EventLog's, which other runs page.
    // `ledger_seq` names the entry kept as sent (its SSE frame id), so a follower can tell it was not applied.
    this.warn(batch, code, `${type} dropped: ${reason}`, { sequence, ledger_seq });
    if (!this.dropAudits.admit()) return;
    batch.audits.push({
      eventType: "runner.result_dropped",
      ...this.init.place,
      runId: this.init.runId,
      data: { run_id: this.init.runId, runner_id: this.init.runnerId, result_type: type, sequence, ledger_seq, ...facts, reason },
    });
  }

  private addMessage(batch: ResultBatch, message: Message) {
    this.sawMessage = true;
    this.lastMessage = message;
    batch.transcriptItems.push({
      ...this.itemBase(),
      role: message.role,
      itemType: "message",
      content: messageText(message),
      contentJson: typeof message.content === "string" ? undefined : message.content,
      artifactRefs: [...this.pending.values()],
    });
    this.pending.clear();
    this.streamed = "";
  }

  /**
   * Artifacts announced after the run's last message, with no message left to carry them: an assistant item of
   * their own (item_type "artifacts", no content), so the transcript keeps what the run made. Taken once.
   */
  private trailingArtifacts(): NewTranscriptItem[] {
    if (this.pending.size === 0) return [];
    const item = { ...this.itemBase(), role: "assistant", itemType: "artifacts", artifactRefs: [...this.pending.values()] };
    this.pending.clear();
    return [item];
  }

  private itemBase() {
    const { eventId, runId, place } = this.init;
    return { transcriptId: newId("tr"), conversationKey: place.conversationKey, eventId, runId, conversationId: place.conversationId, threadId: place.threadId };
  }

  /**
   * One more result of a kind the run may have at most `limit` of (`fits`: whether it is within it), else the error
   * that fails the run (a runner looping on it would otherwise write a row per line up to the stream's byte limit).
   * That result stays in the ledger as sent, dropped (a warning names it); what came before is written with the run's end.
   */
  private withinCap(batch: ResultBatch, recorded: LedgerEntry, fits: boolean, code: RunFailureCode, what: string, limit: number | undefined): void {
    if (fits) return;
    this.drop(batch, recorded, `${what}; the run fails`, { limit }, OVER_LIMIT_WARNING);
    throw new RunnerCallError(code, `${what}; those before were kept`);
  }

  /** One more message of the run's (a `message.completed`, or one `run.completed` adds): past RUN_MAX_MESSAGES, the run fails. */
  private countMessage(batch: ResultBatch, recorded: LedgerEntry) {
    const limit = this.init.maxMessages;
    this.messages++;
    this.withinCap(batch, recorded, limit === undefined || this.messages <= limit, "runner.too_many_messages", `the run sent more than ${limit} messages (RUN_MAX_MESSAGES)`, limit);
  }

  private apply(result: KnownResult, batch: ResultBatch, recorded: LedgerEntry) {
    switch (result.type) {
      case "message.completed":
        if (isBlankMessage(result.data.message)) return this.drop(batch, recorded, "the message has no content");
        this.countMessage(batch, recorded);
        return this.addMessage(batch, result.data.message);
      case "state.updated": {
        const scopeKey = this.init.stateScopes[result.data.scope];
        if (!scopeKey) return this.drop(batch, recorded, unavailableStateScope(result.data.scope, this.init.stateScopesUnidentified));
        const limit = this.init.maxStateUpdates;
        // Taken from the budget the run's state.set calls take from too.
        const what = `the run made more than ${limit} state writes (RUN_MAX_STATE_UPDATES, state.updated results and state.set calls together)`;
        this.withinCap(batch, recorded, limit === undefined || this.stateWrites.take(limit), "runner.too_many_state_updates", what, limit);
        batch.stateWrites.push({ scope: result.data.scope, scopeKey, key: result.data.key, valueJson: JSON.stringify(result.data.value), recorded });
        return;
      }
      case "artifact.created": {
        const d = result.data;
        if (d.content_base64 == null && !d.artifact_id) return this.drop(batch, recorded, "neither artifact_id nor content_base64 given");
        // Past the cap, dropped before anything is stored or looked up: the run's maps and items stay bounded.
        const limit = this.init.maxArtifacts ?? Infinity;
        if (this.artifacts >= limit) return this.drop(batch, recorded, `the run's limit of ${limit} artifacts is reached`, { limit }, "result.artifact_limit");
        this.artifacts++;
        // Empty content is a 0-byte artifact, as artifact.upload stores one.
        if (d.content_base64 != null) {
          const ref = { artifact_id: newId("art"), artifact_type: d.artifact_type, mime_type: d.mime_type ?? undefined, name: d.name ?? undefined };
          // The ledger names the stored artifact instead of repeating its bytes (up to 1 MiB) to every follower and
          // replay, with the stored facts (size, digest) in place of the runner's claims.
          const { content_base64: _stored, ...described } = d;
          const data = { ...described, artifact_id: ref.artifact_id, size_bytes: base64DecodedLength(d.content_base64) };
          recorded.data = data;
          batch.inlineArtifacts.push({ ref, contentBase64: d.content_base64, metadata: d.metadata ?? {}, recorded: data, entry: recorded });
          this.pending.set(ref.artifact_id, ref);
          if (d.artifact_id) this.inlineIds.set(d.artifact_id, ref.artifact_id);
        } else if (d.artifact_id) {
          const ref = { artifact_id: d.artifact_id, artifact_type: d.artifact_type, mime_type: d.mime_type ?? undefined, name: d.name ?? undefined, size_bytes: d.size_bytes ?? undefined };
          batch.artifactReferences.push({ ref, recorded });
          // Announced again before the next message: that message carries it once.
          if (!this.pending.has(ref.artifact_id)) this.pending.set(ref.artifact_id, ref);
        }
        return;
      }
      case "run.completed": {
        let message: Message | undefined;
        if (result.data.message?.role !== undefined && result.data.message.role !== "assistant") {
          // Only its message is dropped: the entry still ends the run, and delivery shows no other role.
          this.reportDrop(batch, recorded, "its message must have role assistant; the message is dropped, the completion kept");
        } else if (result.data.message && !isBlankMessage(result.data.message) && !sameMessage(result.data.message, this.lastMessage)) {
          // Its own message unless it repeats the last one: a final answer after an interim one ("one moment…") is kept.
          message = result.data.message;
        }
        // Else an answer streamed as deltas and never completed is what chat showed as the answer: the run's message too.
        if (!message && this.streamed?.trim()) message = { role: "assistant", content: this.streamed };
        // It counts as a message.completed does: one past the cap fails the run, the completion not applied.
        if (message) {
          this.countMessage(batch, recorded);
          this.addMessage(batch, message);
        }
        this.terminalResult = result;
        batch.transcriptItems.push(...this.trailingArtifacts());
        return;
      }
      case "run.failed":
        this.terminalResult = result;
        batch.transcriptItems.push(...this.trailingArtifacts());
        return;
      case "message.delta": {
        // Streamed live; kept only for an answer that is never completed (run.completed above).
        const text = messageText(result.data.chunk);
        this.streamed = this.streamed !== null && this.streamed.length + text.length <= STREAMED_TEXT_MAX_CHARS ? this.streamed + text : null;
        return;
      }
      default:
        // tool.call.* and action.requested are ledger-only in v1.
        return;
    }
  }
}
