import type { Concurrency, ConcurrencyStrategy, DeliveryPolicy, ResourcePolicy, StatePolicy } from "../agents/policy";
import type { AgentEventContext, ActorContext, ConversationContext, InputContext, SubjectContext } from "../protocol/context";
import type { Capabilities, Permissions } from "../protocol/manifest";
import type { PlatformDelivery } from "../platforms/types";
import { privateAudienceOf } from "../platforms/audience";
import type { ArtifactReader } from "../artifacts/policy";

/**
 * Everything a Durable Object needs to run one event, fixed at ingress and
 * kept in the DO's storage until the run ends. Holds no credential: the
 * runner service's secret is read when the run starts.
 */
export interface RunJob {
  runId: string;
  conversationKey: string;
  publicBaseUrl: string;
  event: AgentEventContext;
  eventSeq: number;
  /** The event's own user item, when it has one. */
  transcriptSeq: number | null;
  /** The conversation's newest item at ingress: the event's own, or the last before an event without one. */
  latestTranscriptSeq: number | null;
  conversation: ConversationContext;
  actor: ActorContext | null;
  subject: SubjectContext | null;
  input: InputContext;
  agent: {
    agentId: string;
    /** Part of its state scope keys (schema: agent.state_epoch); absent from jobs stored before it existed. */
    stateEpoch?: string | null;
    runnerConfig: Record<string, unknown>;
    resourcePolicy: ResourcePolicy;
    statePolicy: StatePolicy;
    deliveryPolicy: DeliveryPolicy;
    concurrency: Concurrency;
  };
  runner: {
    runnerId: string;
    runnerName: string;
    serviceId: string;
    baseUrl: string;
    /** Only what the run's authorisation needs from the manifest: the job stays small. */
    capabilities: Capabilities;
    permissions: Permissions;
    /** The config_schema's defaults, for the fields an agent's runner_config leaves out (absent in jobs stored before they were kept). */
    configDefaults?: Record<string, unknown>;
    /** The config_schema's `secret` fields: their values are never quoted back from the runner (../run/sent-secrets.ts). Absent in jobs stored before. */
    secretFields?: string[];
  };
  /** Set for chat platform events: where the reply is delivered. */
  delivery?: PlatformDelivery;
  /**
   * An album's item that did not address the bot, of an agent answering only what does (trigger_policy): it joins its
   * album's run (the caption on another item addressed it), else starts nothing and is recorded `unaddressed`.
   */
  joinsAlbumOnly?: boolean;
  /** An album's items gathered into this run (durable-objects/albums.ts); `input` is theirs, joined. */
  album?: {
    mediaGroupId: string;
    /** When its own wait ends (ALBUM_WAIT_MS after the last item arrived); items still on their way may hold it longer (durable-objects/album-holds.ts). Absent in runs stored by earlier releases. */
    waitUntil?: number;
    parts: AlbumPart[];
  };
  /**
   * Slack members' joins gathered into this welcome run, its own aside (durable-objects/welcomes.ts): Slack sends one
   * event per member. Their members are in `event.data.members`, counted in `members_count`.
   */
  joined?: {
    /** When its own wait ends (JOIN_WAIT_MS after the last join arrived). */
    waitUntil: number;
    /** The latest a join may hold it: gathering ends then, however many come. */
    holdUntil: number;
    /** Each join's event and the run ingress made for it, discarded once it joined. */
    events: { eventId: string; runId: string }[];
  };
}

/** One item of an album as it joined its run. */
export interface AlbumPart {
  eventId: string;
  /** The run ingress made for the item (the gathering run's own, for its first item), discarded once it joined. */
  runId: string;
  /** Where the item stands in the album (its platform message id). */
  order: number;
  input: InputContext;
  /**
   * Which of its input's files are the replied message's (`event.data.reply_to.attachments`): Telegram repeats an
   * album's reply on every item, so each downloads them, and the run keeps one item's. Absent in runs stored by earlier releases.
   */
  replied?: string[];
}

/** The decision recorded for an album's item that joined the run `runId` (EventLog `merged`). */
export const mergedDecision = (mediaGroupId: string, runId: string) => ({ disposition: "merged" as const, runId, metadata: { album: { media_group_id: mediaGroupId, run_id: runId } } });

/** The decision recorded for a member's join that joined the welcome run `runId` of the join `headEventId` (EventLog `merged`). */
export const joinedDecision = (headEventId: string, runId: string) => ({ disposition: "merged" as const, runId, metadata: { joined_with: headEventId } });

/** Whose eyes alone a run's event and answer are for (platforms/audience.ts); null when the whole chat's (or an API caller's). */
export const audienceOf = (job: Pick<RunJob, "delivery">): string | null => privateAudienceOf(job.delivery?.target);

/** The run as a reader of its conversation's artifacts: never another audience's (artifacts/policy.ts). */
export const artifactReaderOf = (job: Pick<RunJob, "conversationKey" | "runId" | "delivery">): ArtifactReader => ({ conversationKey: job.conversationKey, runId: job.runId, audience: audienceOf(job) });

/** Whether two runs' events and answers are for the same eyes: only then may one run answer the other's message, or one's question make the other's answer moot. */
export const sameAudience = (a: Pick<RunJob, "delivery">, b: Pick<RunJob, "delivery">) => audienceOf(a) === audienceOf(b);

/** The agent's concurrency strategy; by default (PROTOCOL §10) steer when the runner supports it, else enqueue. */
export function strategyOf(job: RunJob): ConcurrencyStrategy {
  return job.agent.concurrency.strategy ?? (job.runner.capabilities.steering ? "steer" : "enqueue");
}

/** Events that ask the agent something: the ones its concurrency strategy decides for (PROTOCOL §10 names messages). */
const ASKING_EVENTS: ReadonlySet<string> = new Set(["message.received", "api.invoked"]);
export const asks = (job: RunJob) => ASKING_EVENTS.has(job.event.event_type);

/**
 * How an event meets a busy conversation: one that asks (a message, an API invocation) by its agent's strategy; a
 * notification (a join, a recall, a schedule) waits its turn, or runs alongside under `parallel`: a member joining
 * never cancels the answer being written, nor is it refused for arriving then.
 */
export function arrivalStrategy(job: RunJob): ConcurrencyStrategy {
  const strategy = strategyOf(job);
  return asks(job) || strategy === "parallel" ? strategy : "enqueue";
}
