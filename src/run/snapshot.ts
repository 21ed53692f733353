import { PERMISSION_GROUPS, type Permissions } from "../protocol/manifest";
import type { AvailableApis, StateScope } from "../protocol/context";
import { stateScopeKey } from "../stores/state";
import { grantResources, identitiesOf, NO_RESOURCE_DESCRIPTORS, type GrantedResources, type ResourceDescriptors, type ResourceIdentities } from "../resources/grants";
import { audienceOf, strategyOf, type RunJob } from "./job";

/**
 * The run's frozen authorisation (PROTOCOL §4): computed once before the run,
 * the only thing the Host API consults during it. Never recomputed from
 * policy mid-run, so an operator edit cannot widen a running run's access.
 */
export interface AuthorizationSnapshot {
  runId: string;
  runnerId: string;
  agentId: string;
  /** The agent's state epoch (null for an agent without one): whose state the run writes. */
  agentEpoch: string | null;
  serviceId: string;
  conversationKey: string;
  conversationId: string | null;
  threadId: string | null;
  workspaceId: string | null;
  botId: string | null;
  /** Whose eyes alone its answer is for (platforms/audience.ts), null when the whole chat's: what of the history it may read. */
  privateAudience: string | null;
  permissions: Permissions;
  availableApis: AvailableApis;
  /** scope → scope key, only for scopes the state policy enables and the event identifies. */
  stateScopes: Partial<Record<StateScope, string>>;
  /** Scopes the state policy enables whose identity the event lacks (no actor id, ...): refusals name that cause, not the policy. */
  stateScopesUnidentified: StateScope[];
  storage: { plugin_storage: boolean; workspace_storage: boolean };
  /** Host-held models, tools and knowledge bases this run may use, with their operations. */
  resources: GrantedResources;
  /**
   * Which resource each granted id named at run start: one deleted and registered anew under its id since is not
   * the one granted. Absent from snapshots stored before it was kept (their runs are not checked).
   */
  resourceIdentities?: ResourceIdentities;
  deadlineAt: number;
}

const OPT_IN_GROUPS: ReadonlySet<string> = new Set(["storage"]);

/** manifest.permissions ∩ agent.resource_policy.allow (an omitted group keeps the manifest's request). */
export function effectivePermissions(manifest: Permissions, allow: Permissions | undefined): Permissions {
  const out: Record<string, string[]> = {};
  for (const group of PERMISSION_GROUPS) {
    const asked: readonly string[] = manifest[group] ?? [];
    // Storage areas are shared (a whole runner service, a whole workspace): granted only when the agent says so (§9).
    const granted = allow?.[group] ?? (OPT_IN_GROUPS.has(group) ? [] : undefined);
    const values = granted === undefined ? asked : asked.filter((v) => (granted as readonly string[]).includes(v));
    if (values.length) out[group] = [...values];
  }
  // Built from PERMISSION_GROUPS with values drawn from the validated manifest, so it is a Permissions.
  return out as Permissions;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** `resources`: the granted resources' descriptors, read at run start (resources/grants.ts). */
export type StateScopeKeys = Partial<Record<StateScope, string>>;

/** Scope → scope key, only for scopes the state policy enables and the event identifies. */
export async function stateScopesOf(job: RunJob): Promise<StateScopeKeys> {
  const stateScopes: StateScopeKeys = {};
  if (job.agent.statePolicy.enable_state) {
    const identity = {
      runnerId: job.runner.runnerId,
      agentId: job.agent.agentId,
      stateEpoch: job.agent.stateEpoch,
      workspaceId: job.conversation.workspace_id,
      botId: job.conversation.bot_id,
      conversationId: job.conversation.conversation_id,
      threadId: job.conversation.thread_id,
      actorType: job.actor?.actor_type,
      actorId: job.actor?.actor_id,
      subjectType: job.subject?.subject_type,
      subjectId: job.subject?.subject_id,
    };
    for (const scope of job.agent.statePolicy.state_scopes) {
      const key = await stateScopeKey(scope, identity);
      if (key) stateScopes[scope] = key;
    }
  }
  return stateScopes;
}

export function freezeSnapshot(job: RunJob, deadlineAt: number, stateScopes: StateScopeKeys, resources: ResourceDescriptors = NO_RESOURCE_DESCRIPTORS, opts: { holdsClaims?: boolean } = {}): AuthorizationSnapshot {
  const permissions = effectivePermissions(job.runner.permissions, job.agent.resourcePolicy.allow);
  const has = (group: keyof Permissions, op: string) => ((permissions[group] ?? []) as readonly string[]).includes(op);
  const storage = { plugin_storage: has("storage", "plugin"), workspace_storage: has("storage", "workspace") && Boolean(job.conversation.workspace_id) };

  const granted = grantResources(permissions, job.agent.resourcePolicy, resources);
  return deepFreeze({
    runId: job.runId,
    runnerId: job.runner.runnerId,
    agentId: job.agent.agentId,
    agentEpoch: job.agent.stateEpoch ?? null,
    serviceId: job.runner.serviceId,
    conversationKey: job.conversationKey,
    conversationId: job.conversation.conversation_id ?? null,
    threadId: job.conversation.thread_id ?? null,
    workspaceId: job.conversation.workspace_id ?? null,
    botId: job.conversation.bot_id ?? null,
    privateAudience: audienceOf(job),
    permissions,
    availableApis: {
      history_page: has("history", "page"),
      history_search: has("history", "search"),
      event_get: has("events", "get"),
      event_page: has("events", "page"),
      artifact_metadata: has("artifacts", "metadata"),
      artifact_read: has("artifacts", "read"),
      state: Object.keys(stateScopes).length > 0,
      storage: storage.plugin_storage || storage.workspace_storage,
      // Only a run whose agent steers is ever given messages to pull, or one that holds messages claimed while it waited
      // (its agent steered then): an edit to its strategy since must not leave them unpulled, dropped.
      steering_pull: job.runner.capabilities.steering === true && (strategyOf(job) === "steer" || opts.holdsClaims === true),
    },
    stateScopes,
    stateScopesUnidentified: job.agent.statePolicy.enable_state ? job.agent.statePolicy.state_scopes.filter((scope) => stateScopes[scope] === undefined) : [],
    storage,
    resources: granted,
    resourceIdentities: identitiesOf(granted, resources),
    deadlineAt,
  });
}
