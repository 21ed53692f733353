import { ConcurrencySchema, DeliveryPolicySchema, ResourcePolicySchema, StatePolicySchema } from "../agents/policy";
import type { Db } from "../db/client";
import type { RunJob } from "../run/job";
import { jobAgentOf, jobRunnerOf } from "../run/job-parts";
import { currentAgentStatement, type BoundAgent } from "../stores/binding-resolution";
import type { RunRow } from "../stores/runs";

/**
 * The agent and runner of the job of a repeat handing its lost run over: the agent that bound the event (the run's
 * `agent_id`), as it is now, whatever binds the conversation now. A run waiting to start runs with its agent as it is
 * then (re-scoped, moved to another runner: README "Effective access"), never under another agent, which never bound
 * the event. `bound` (what the repeat's resolution picked) spares a read when it is that agent.
 *
 * An agent that can no longer take it (deleted, disabled, deleted and created anew under its id: another state epoch,
 * or its runner removed) gets a job naming the agent as created then and the runner the run was recorded with, so its
 * claim fails it (claim.ts refusalOf: `host.agent_unavailable`) as it fails a queued run; as a parallel run without
 * debounce it fails at once, neither waiting a turn, steered into a run, nor rejected. A run recorded before its
 * agent's epoch was kept (migration 0016: `agent_epoch` null) is taken as bound by the agent of its id.
 */
export async function lostRunAgent(db: Db, first: RunRow, bound: BoundAgent | undefined): Promise<Pick<RunJob, "agent" | "runner">> {
  const now = bound?.agent.agentId === first.agentId ? bound : (await currentAgentStatement(db, first.agentId).execute())[0];
  const sameAgent = now !== undefined && (first.agentEpoch === null || first.agentEpoch === (now.agent.stateEpoch ?? ""));
  if (sameAgent && now.agent.enabled && now.runner && now.service) return { agent: jobAgentOf(now.agent), runner: jobRunnerOf(now.runner, now.service) };
  const stateEpoch = first.agentEpoch === null ? now?.agent.stateEpoch : first.agentEpoch || null;
  const agent: RunJob["agent"] = now
    ? jobAgentOf(now.agent)
    : {
        agentId: first.agentId,
        runnerConfig: {},
        resourcePolicy: ResourcePolicySchema.parse({}),
        statePolicy: StatePolicySchema.parse({}),
        deliveryPolicy: DeliveryPolicySchema.parse({}),
        concurrency: {},
      };
  const runner = now?.runner && now.service ? jobRunnerOf(now.runner, now.service) : { runnerName: "", serviceId: "", baseUrl: "", capabilities: {}, permissions: {} };
  return {
    agent: { ...agent, stateEpoch, concurrency: ConcurrencySchema.parse({ strategy: "parallel" }) },
    runner: { ...runner, runnerId: first.runnerId },
  };
}
