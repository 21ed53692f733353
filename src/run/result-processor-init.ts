import type { StateScope } from "../protocol/context";
import type { WriteBudget } from "../lib/write-budget";
import type { RecordPlace } from "../stores/event-log";
import type { LedgerSequence } from "./ledger-sequence";
import type { QuoteScrub } from "./sent-secrets";

/** What a run's ResultProcessor (results.ts) is given: the run's identity, its place, and the caps its results meet. */
export interface ResultProcessorInit {
  runId: string;
  runnerId: string;
  eventId: string;
  /** The run's conversation, where its transcript items and host records go. */
  place: RecordPlace & { conversationKey: string };
  /** Enabled, available state scopes of this run (frozen in its snapshot). */
  stateScopes: Partial<Record<StateScope, string>>;
  /** Of the scopes the state policy enables, those the event does not identify (the snapshot's): what a drop names as its cause. */
  stateScopesUnidentified?: readonly StateScope[];
  /** Shared with other ledger writers of the run; a private counter when absent. */
  ledgerSequence?: LedgerSequence;
  /** Most `artifact.created` results the run may have accepted (RUN_MAX_ARTIFACTS); past it each is dropped. None when absent. */
  maxArtifacts?: number;
  /** Most messages the run may have accepted (RUN_MAX_MESSAGES: `message.completed`, and the one `run.completed` adds); one more fails it. None when absent. */
  maxMessages?: number;
  /** Most state writes the run may make (RUN_MAX_STATE_UPDATES); a `state.updated` result past it fails it. None when absent. */
  maxStateUpdates?: number;
  /** The run's state writes so far, shared with its `state.set` calls (its session's); a private count when absent. */
  stateWrites?: WriteBudget;
  /** Most result lines the run may send (RUN_MAX_RESULTS), duplicates included; one more fails it. None when absent. */
  maxResults?: number;
  /** What a protocol error quoting a line leaves out (the run's secrets: ./sent-secrets.ts); quoted as sent when absent. */
  scrub?: QuoteScrub;
}
