import type { ArtifactRef } from "../protocol/common";
import type { StateScope } from "../protocol/context";
import type { RunnerCallError } from "../runner/errors";
import type { HostRecord } from "../stores/event-log";
import type { LedgerEntry } from "../stores/runs";
import type { NewTranscriptItem } from "../stores/transcript";

export interface StateWrite {
  scope: StateScope;
  scopeKey: string;
  key: string;
  valueJson: string;
  recorded: LedgerEntry;
}

/** What one chunk of results asks the host to write (ResultProcessor decides it, ./results.ts); the executor does the I/O as one batch. */
export interface ResultBatch {
  ledger: LedgerEntry[];
  transcriptItems: NewTranscriptItem[];
  /** `recorded`: the `state.updated` entry, which a write past its scope's cap is dropped by (run/state-caps.ts). */
  stateWrites: StateWrite[];
  /** `recorded` is the ledger entry's data: the stored artifact's digest is written into it once known; `entry`, that entry. */
  inlineArtifacts: { ref: ArtifactRef & { artifact_type: string }; contentBase64: string; metadata: Record<string, unknown>; recorded: Record<string, unknown>; entry: LedgerEntry }[];
  /** `artifact.created {artifact_id}` references, with their ledger entries: the executor checks them against the store before they are written. */
  artifactReferences: { ref: ArtifactRef; recorded: LedgerEntry }[];
  audits: HostRecord[];
  /** Set when this batch held run.completed or run.failed: stop reading. */
  terminal: boolean;
  /** A protocol violation that ends the run, after what came before it in the batch is written. */
  error?: RunnerCallError;
}
