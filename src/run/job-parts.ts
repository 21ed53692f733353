import { secretFieldNames } from "../agents/runner-config";
import { ConcurrencySchema, DeliveryPolicySchema, ResourcePolicySchema, StatePolicySchema } from "../agents/policy";
import type { agent, runner } from "../db/schema";
import { parseJson } from "../lib/json";
import type { AgentRunnerManifest } from "../protocol/manifest";
import type { RunJob } from "./job";

/** What a job takes from the agent row: read at ingress, and again when the run starts (the agent may have changed meanwhile). */
export function jobAgentOf(row: typeof agent.$inferSelect): RunJob["agent"] {
  return {
    agentId: row.agentId,
    stateEpoch: row.stateEpoch,
    runnerConfig: parseJson<Record<string, unknown>>(row.runnerConfigJson, {}),
    resourcePolicy: ResourcePolicySchema.parse(parseJson(row.resourcePolicyJson, {})),
    statePolicy: StatePolicySchema.parse(parseJson(row.statePolicyJson, {})),
    deliveryPolicy: DeliveryPolicySchema.parse(parseJson(row.deliveryPolicyJson, {})),
    concurrency: ConcurrencySchema.parse(parseJson(row.concurrencyJson, {})),
  };
}

/** What a job takes from the runner row and its service: only what the run's authorisation needs from the manifest. */
export function jobRunnerOf(row: typeof runner.$inferSelect, service: { serviceId: string; baseUrl: string }): RunJob["runner"] {
  // Validated when the service was registered.
  const manifest = parseJson<AgentRunnerManifest>(row.manifestJson, {} as AgentRunnerManifest);
  return {
    runnerId: row.runnerId,
    runnerName: row.name,
    serviceId: service.serviceId,
    baseUrl: service.baseUrl,
    capabilities: manifest.capabilities ?? {},
    permissions: manifest.permissions ?? {},
    configDefaults: Object.fromEntries((manifest.config_schema ?? []).filter((item) => item.default != null).map((item) => [item.name, item.default])),
    secretFields: [...secretFieldNames(manifest.config_schema)],
  };
}
