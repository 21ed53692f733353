import { dbOf } from "../src/db/connect";
import { artifactsOf } from "../src/artifacts/bucket";
import { configOf, type Env } from "../src/env";
import type { ActionContext, SteeringPort } from "../src/host-api/actions/index";
import { refusePastDeadline, refuseToken, type HostApiReply } from "../src/host-api/handle";
import { RunnerCallError } from "../src/runner/errors";
import { constantTimeEqual, randomToken, sha256Hex } from "../src/lib/crypto";
import { hostLedger } from "../src/run/host-ledger";
import type { LedgerEntry } from "../src/stores/runs";
import type { RunJob } from "../src/run/job";
import { LedgerSequence } from "../src/run/ledger-sequence";
import { McpSessionPool } from "../src/resources/mcp";
import { OpenStreams } from "../src/host-api/open-streams";
import { DenialCount } from "../src/host-api/denial-cap";
import { WriteBudget } from "../src/lib/write-budget";
import type { Db } from "../src/db/client";
import type { AuthorizationSnapshot } from "../src/run/snapshot";

/**
 * An active run in the session registry: its frozen authorisation and the
 * hash of its token (the token itself is only in the runner's context).
 * Lives in memory only: a Durable Object that lost it has lost the run.
 */
export class RunSession {
  /** Ledger numbering shared by the run's result stream and its Host API records. */
  readonly ledgerSequence = new LedgerSequence();
  /** Bytes the run's uploads took of its ARTIFACT_UPLOAD_RUN_MAX_BYTES budget: what they stored, and what uploads still arriving hold (declared lengths, reservations of chunked bodies). */
  uploadedBytes = 0;
  /** MCP sessions of the run's tool calls; they end with the run. */
  readonly mcp: McpSessionPool;
  /** Streamed Host API answers not yet ended; the run's end waits for their ends to be recorded. */
  readonly streams = new OpenStreams((ended) => this.ledgerSequence.track(ended));
  /** The run's Host API denials: recorded up to a cap, the rest counted and told when the run is over. */
  readonly denials = new DenialCount();
  /** The run's state writes by either path (results, `state.set`), against one RUN_MAX_STATE_UPDATES. */
  readonly stateWrites = new WriteBudget();
  /** The run's `storage.set` calls, against RUN_MAX_STORAGE_WRITES. */
  readonly storageWrites = new WriteBudget();
  /** The messages its `steering.pull` calls took in, for its end's log line. */
  steered = 0;

  constructor(
    readonly job: RunJob,
    readonly snapshot: AuthorizationSnapshot,
    private readonly tokenHash: string,
    readonly abort: AbortController,
  ) {
    this.mcp = new McpSessionPool(abort.signal);
  }

  async verify(token: string): Promise<boolean> {
    return constantTimeEqual(await sha256Hex(token), this.tokenHash);
  }

  /** What the run's Host API calls act with: its snapshot, its ledger (entries also go to `publish`), its signal and MCP sessions. */
  actionContext(env: Env, steering: SteeringPort, publish: (entries: LedgerEntry[]) => void): ActionContext {
    return { ...this.uploadContext(env, publish), artifacts: artifactsOf(env), steering: this.counted(steering), signal: this.abort.signal, mcp: this.mcp, streams: this.streams, stateWrites: this.stateWrites, storageWrites: this.storageWrites };
  }

  /** `port`, its pulls counted in `steered`. */
  private counted(port: SteeringPort): SteeringPort {
    return {
      pull: async (mode, limit) => {
        const items = await port.pull(mode, limit);
        this.steered += items.length;
        return items;
      },
    };
  }

  /** What an upload's authorisation acts with: the run's snapshot, and its ledger and denial count for a denial. */
  uploadContext(env: Env, publish: (entries: LedgerEntry[]) => void): Pick<ActionContext, "db" | "config" | "snapshot" | "ledger" | "denials"> {
    const db = dbOf(env);
    return { db, config: configOf(env), snapshot: this.snapshot, ledger: hostLedger(db, this.job.runId, this.ledgerSequence, publish), denials: this.denials };
  }

  /** The run is over: its MCP sessions end, and the denials it did not record are counted in EventLog. */
  async close(db: Db, retryPausesMs: readonly number[]): Promise<void> {
    await Promise.all([this.mcp.closeAll(), this.denials.tell(db, this.snapshot, retryPausesMs)]);
  }
}

/** The session registry: the live runs of one Durable Object, by run id. */
export class SessionRegistry extends Map<string, RunSession> {
  /** Registers a starting run with a fresh random token, kept here only as its hash; the token goes to the runner. */
  async open(job: RunJob, snapshot: AuthorizationSnapshot, abort: AbortController): Promise<{ session: RunSession; token: string }> {
    const token = randomToken();
    const session = new RunSession(job, snapshot, await sha256Hex(token), abort);
    this.set(job.runId, session);
    return { session, token };
  }

  /** The run's session if `token` is its token and the run is not over (a cancelled run is, even while its stream unwinds). */
  async authenticated(runId: string, token: string): Promise<RunSession | undefined> {
    const session = this.get(runId);
    return session && !session.abort.signal.aborted && (await session.verify(token)) ? session : undefined;
  }

  /** The answer to a token `authenticated` refused: 408 for the run's own token once its deadline stopped it (it is still ending), else 401. */
  async refusal(runId: string, token: string, action: string | null = null): Promise<HostApiReply> {
    const session = this.get(runId);
    const reason: unknown = session?.abort.signal.reason;
    const pastDeadline = reason instanceof RunnerCallError && reason.code === "deadline_exceeded";
    return session && pastDeadline && (await session.verify(token)) ? refusePastDeadline(session.snapshot, action) : refuseToken(runId, session, action);
  }
}
