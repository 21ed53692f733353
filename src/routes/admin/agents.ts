import * as z from "zod";
import { dbOf } from "../../db/connect";
import type { Db } from "../../db/client";
import { AgentInputSchema, storedScope, type AgentInput } from "../../agents/policy";
import { badRequest, conflict, notFound } from "../../lib/errors";
import { insertUnique } from "./unique";
import { missingConfigFields } from "../../agents/runner-config";
import { newId } from "../../lib/ids";
import { parseJson } from "../../lib/json";
import type { AgentRunnerManifest } from "../../protocol/manifest";
import { jsonBody } from "../../middleware/validate";
import { agentsStore, BindingConflictError, toAgentView, type NewAgentRow } from "../../stores/agents";
import { registryStore } from "../../stores/registry";
import { unknownGrants } from "../../resources/grants";
import { router } from "../app-env";

/** The runner must exist, and runner_config must carry every required field of its config_schema. */
async function checkRunnerConfig(db: Db, input: AgentInput) {
  const runner = await registryStore(db).getRunner(input.runner_id);
  if (!runner) throw badRequest(`runner ${input.runner_id} is not registered`);
  const manifest = parseJson<AgentRunnerManifest>(runner.manifestJson, {} as AgentRunnerManifest);
  const missing = missingConfigFields(manifest.config_schema, input.runner_config);
  if (missing.length) throw badRequest(`runner_config is missing required fields: ${missing.join(", ")}`, { missing });
}

/** Every model, tool and knowledge base the policy grants must be registered (a typo would grant nothing, silently). */
async function checkResourceGrants(db: Db, input: AgentInput) {
  const unknown = await unknownGrants(db, input.resource_policy);
  if (unknown.length) throw badRequest(`resource_policy grants resources that are not registered: ${unknown.join(", ")}`, { unknown });
}

function toRow(agentId: string, input: AgentInput, createdAt: number): NewAgentRow {
  return {
    agentId,
    name: input.name,
    description: input.description ?? null,
    runnerId: input.runner_id,
    runnerConfigJson: JSON.stringify(input.runner_config),
    eventTypesJson: JSON.stringify([...new Set(input.event_types)]),
    ...storedScope(input.scope),
    resourcePolicyJson: JSON.stringify(input.resource_policy),
    statePolicyJson: JSON.stringify(input.state_policy),
    deliveryPolicyJson: JSON.stringify(input.delivery_policy),
    concurrencyJson: JSON.stringify(input.concurrency),
    enabled: input.enabled,
    createdAt,
    updatedAt: Date.now(),
  };
}

async function save(write: () => Promise<void>) {
  try {
    await write();
  } catch (err) {
    if (err instanceof BindingConflictError) throw conflict(err.message, { conflicts: err.conflicts.map((c) => ({ agent_id: c.agentId, event_type: c.eventType })) });
    throw err;
  }
}

/** PUT replaces the agent with the same body as POST; what GET answered can be sent back as it is (its timestamps are ignored). */
const AgentReplaceSchema = AgentInputSchema.extend({ created_at: z.string().optional(), updated_at: z.string().optional() });

export const agentsRouter = router()
  .get("/", async (c) => c.json({ items: (await agentsStore(dbOf(c.env)).list()).map(toAgentView) }))
  .post("/", jsonBody(AgentInputSchema), async (c) => {
    const db = dbOf(c.env);
    const input = c.get("body");
    await checkRunnerConfig(db, input);
    await checkResourceGrants(db, input);
    const store = agentsStore(db);
    const agentId = input.agent_id ?? newId("agt");
    if (await store.get(agentId)) throw conflict(`agent ${agentId} already exists`);
    const row = toRow(agentId, input, Date.now());
    // A concurrent create of the same id passed the check above too: its insert is refused (409), not a 500.
    await insertUnique(() => save(() => store.create(row)), `agent ${agentId}`);
    return c.json(toAgentView((await store.get(agentId))!), 201);
  })
  .get("/:agentId", async (c) => {
    const row = await agentsStore(dbOf(c.env)).get(c.req.param("agentId"));
    if (!row) throw notFound(`agent ${c.req.param("agentId")} not found`);
    return c.json(toAgentView(row));
  })
  .put("/:agentId", jsonBody(AgentReplaceSchema), async (c) => {
    const db = dbOf(c.env);
    const agentId = c.req.param("agentId");
    const input = c.get("body");
    if (input.agent_id && input.agent_id !== agentId) throw badRequest("agent_id in the body differs from the path");
    const store = agentsStore(db);
    const existing = await store.get(agentId);
    if (!existing) throw notFound(`agent ${agentId} not found`);
    await checkRunnerConfig(db, input);
    await checkResourceGrants(db, input);
    await save(() => store.replace(toRow(agentId, input, existing.createdAt)));
    return c.json(toAgentView((await store.get(agentId))!));
  })
  .delete("/:agentId", async (c) => {
    const store = agentsStore(dbOf(c.env));
    const agentId = c.req.param("agentId");
    if (!(await store.get(agentId))) throw notFound(`agent ${agentId} not found`);
    await store.remove(agentId);
    return c.body(null, 204);
  });
