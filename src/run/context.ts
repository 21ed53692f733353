import { STATE_SCOPES, type AgentRunContextInput, type EnabledStateSnapshot, type StateScope } from "../protocol/context";
import { withConfigDefaults } from "../agents/runner-config";
import { encodeCursor } from "../lib/cursor";
import { platformDeliveryContext } from "../delivery/context";
import { hasHistoryBefore, type HistoryBefore } from "./history-before";
import type { RunJob } from "./job";
import type { AuthorizationSnapshot } from "./snapshot";

export interface ContextParts {
  job: RunJob;
  snapshot: AuthorizationSnapshot;
  token: string;
  state: StateRead;
  historyBefore?: HistoryBefore;
  hostVersion: string;
}

/** The enabled scopes' snapshot as read at run start, and the scopes it holds only part of (key or byte bound). */
export interface StateRead {
  values: EnabledStateSnapshot;
  partial: StateScope[];
}

function latestCursor(job: RunJob): string | null {
  if (job.transcriptSeq) return encodeCursor("t", job.transcriptSeq, job.conversationKey);
  return job.latestTranscriptSeq ? encodeCursor("g", job.latestTranscriptSeq, job.conversationKey) : null;
}

/**
 * PROTOCOL §5: event-first, no history inlined. `latest_cursor` points at the
 * current event's transcript item, so `history.page(before_cursor)` returns
 * what came before it; for an event without an item of its own, at the gap
 * after the newest item when it arrived, so the same call returns the whole
 * history and `after_cursor` what was written since.
 */
export function buildRunContext({ job, snapshot, token, state, historyBefore, hostVersion }: ContextParts): AgentRunContextInput {
  const deadline = new Date(snapshot.deadlineAt).toISOString();
  return {
    run_id: job.runId,
    trigger: { type: job.event.event_type, source: job.event.source === "api" ? "api" : "platform", timestamp: job.event.event_time },
    event: job.event,
    conversation: job.conversation,
    actor: job.actor,
    subject: job.subject,
    input: job.input,
    delivery: job.delivery ? platformDeliveryContext(job.delivery, job.agent.deliveryPolicy) : {
      surface: job.event.source,
      // A platform event with nowhere to reply (a recall) has no live surface; an API caller follows the run's stream.
      supports_streaming: job.event.source === "api" && job.agent.deliveryPolicy.streaming,
      supports_edit: false,
      supports_reaction: false,
      platform_capabilities: {},
    },
    resources: {
      models: snapshot.resources.models,
      tools: snapshot.resources.tools,
      knowledge_bases: snapshot.resources.knowledge_bases,
      skills: [],
      files: [],
      storage: snapshot.storage,
      platform_capabilities: {},
    },
    context: {
      conversation_id: snapshot.conversationId,
      thread_id: snapshot.threadId,
      latest_cursor: latestCursor(job),
      event_seq: job.eventSeq,
      transcript_seq: job.transcriptSeq,
      // Before the event's own item; an event without one comes after the whole history. Only what this run may read.
      has_history_before: hasHistoryBefore(job, historyBefore),
      inline_policy: { mode: "current_event", delivered_count: 0, messages_complete: false },
      available_apis: snapshot.availableApis,
    },
    // Every scope is there, as LangBot's host sends it: a disabled or unidentified one empty (runtime.metadata.state_scopes names the others).
    state: { conversation: {}, actor: {}, subject: {}, runner: {}, ...state.values },
    runtime: {
      host_version: hostVersion,
      trace_id: job.runId,
      deadline_at: deadline,
      api: { base_url: job.publicBaseUrl, token, expires_at: deadline },
      // Not every key of these scopes is in `state`: the rest are read with state.get / state.list.
      metadata: { state_scopes: STATE_SCOPES.filter((s) => snapshot.stateScopes[s] !== undefined), state_partial: state.partial },
    },
    config: withConfigDefaults(job.agent.runnerConfig, job.runner.configDefaults),
    adapter: null,
    // An album's items gathered into this run: `input` holds all of theirs; each is an event of its own (event.get).
    // An answer for one user's eyes alone says so: the runner keeps such an exchange out of what the chat's runs share.
    metadata: {
      agent_id: job.agent.agentId,
      runner_id: job.runner.runnerId,
      ...(job.album ? { album: { media_group_id: job.album.mediaGroupId, event_ids: job.album.parts.map((p) => p.eventId) } } : {}),
      ...(snapshot.privateAudience === null ? {} : { private_audience: snapshot.privateAudience }),
    },
  };
}
