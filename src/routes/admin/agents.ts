import * as z from "zod";
import { dbOf } from "../../db/connect";
import type { Db } from "../../db/client";
import { AgentInputSchema, storedScope, type AgentInput } from "../../agents/policy";
import { badRequest, conflict, notFound } from "../../lib/errors";
import { insertUnique } from "./unique";
import { mistypedConfigFields } from "../../agents/config-types";
import { maskedOnPreviousRunner, missingConfigFields, nonTextSecretFields, restoreSecretFields, sealedLookingFields, sealSecretFields, secretFieldNames } from "../../agents/runner-config";
import { agentConfigSlot } from "../../stores/secret-slots";
import { MASK } from "../../resources/secrets";
import { newId } from "../../lib/ids";
import { parseJson } from "../../lib/json";
import type { AgentRunnerManifest } from "../../protocol/manifest";
import { jsonBody, validate } from "../../middleware/validate";
import { agentsStore, BindingConflictError, toAgentView, type AgentRow, type NewAgentRow } from "../../stores/agents";
import { registryStore } from "../../stores/registry";
import { unknownGrants } from "../../resources/grants";
import { router } from "../app-env";
import { agent } from "../../db/schema";
import { selectPage } from "../../stores/list-page";
import { AdminListQuery, listing } from "./list-page";
import { cancelAgentRuns, leaveAgentRuns } from "../../agents/cancel-runs";
import { changedMeanwhile, checkReadAsStored } from "./replace";
import { nextUpdatedAt } from "../../lib/updated-at";

const configSchemaOf = (manifestJson: string) => parseJson<AgentRunnerManifest>(manifestJson, {} as AgentRunnerManifest).config_schema;

/**
 * The runner must exist, and runner_config must carry every required field of
 * its config_schema, each field of a type the schema names as that type. A secret field sent back masked, as GET showed it, keeps
 * the value stored for the same agent on the same runner. Returns the runner's
 * secret field names, which the answer masks, and its service's address (where its secrets are sealed for).
 */
async function checkRunnerConfig(db: Db, input: AgentInput, existing?: AgentRow): Promise<{ secrets: Set<string>; kept: Set<string>; serviceBaseUrl: string }> {
  const store = registryStore(db);
  const runner = await store.getRunner(input.runner_id);
  const service = runner && (await store.getService(runner.serviceId));
  if (!runner || !service) throw badRequest(`runner ${input.runner_id} is not registered`);
  const schema = configSchemaOf(runner.manifestJson);
  const secrets = secretFieldNames(schema);
  const nonText = nonTextSecretFields(input.runner_config, secrets);
  if (nonText.length) throw badRequest(`runner_config fields typed secret take text: ${nonText.join(", ")}`, { fields: nonText });
  // Kept as stored (sealed): nothing is opened here, so an agent whose stored secret no longer opens can be given a new one.
  const stored = existing?.runnerId === input.runner_id ? parseJson<Record<string, unknown>>(existing.runnerConfigJson, {}) : null;
  const restored = restoreSecretFields(input.runner_config, stored, secrets);
  const unknown = new Set(restored.unknown);
  if (existing && existing.runnerId !== input.runner_id) {
    // Moved to another runner: a secret masked on the previous one cannot be kept, and the mask must not become its value.
    const before = await store.getRunner(existing.runnerId);
    const previous = parseJson<Record<string, unknown>>(existing.runnerConfigJson, {});
    for (const name of maskedOnPreviousRunner(restored.config, previous, secretFieldNames(before && configSchemaOf(before.manifestJson)))) unknown.add(name);
  }
  if (unknown.size) throw badRequest(`runner_config gives the mask ${MASK} for secret fields with no stored value to keep: ${[...unknown].join(", ")}`, { masked: [...unknown] });
  const lookSealed = sealedLookingFields(restored.config, secrets, restored.kept);
  if (lookSealed.length) throw badRequest(`runner_config values must not begin like a sealed secret ("sealed:"): ${lookSealed.join(", ")}`, { fields: lookSealed });
  input.runner_config = restored.config;
  const missing = missingConfigFields(schema, input.runner_config);
  if (missing.length) throw badRequest(`runner_config is missing required fields: ${missing.join(", ")}`, { missing });
  // A value kept as stored is not checked again: a refresh that changed its type left it so, and what GET answered goes back.
  const mistyped = mistypedConfigFields(schema, input.runner_config).filter((m) => !stored || !Object.hasOwn(stored, m.field) || JSON.stringify(stored[m.field]) !== JSON.stringify(input.runner_config[m.field]));
  if (mistyped.length) throw badRequest(`runner_config fields do not have their config_schema type: ${mistyped.map((m) => `${m.field} (${m.expected})`).join(", ")}`, { mistyped });
  return { secrets, kept: restored.kept, serviceBaseUrl: service.baseUrl };
}

/** The secret config field names of these agents' runners (read for them only), for masking a page of agents. */
async function secretsByRunner(db: Db, agents: AgentRow[]): Promise<Map<string, Set<string>>> {
  const schemas = await registryStore(db).configSchemasOf([...new Set(agents.map((a) => a.runnerId))]);
  return new Map([...schemas].map(([runnerId, schema]) => [runnerId, secretFieldNames(parseJson<AgentRunnerManifest["config_schema"] | undefined>(schema, undefined))]));
}

/** Every model, tool and knowledge base the policy grants must be registered (a typo would grant nothing, silently). */
async function checkResourceGrants(db: Db, input: AgentInput) {
  const unknown = await unknownGrants(db, input.resource_policy);
  if (unknown.length) throw badRequest(`resource_policy grants resources that are not registered: ${unknown.join(", ")}`, { unknown });
}

/** The row to store; the runner's secret config fields sealed (`secrets`: their names; see checkRunnerConfig). */
async function toRow(db: Db, agentId: string, input: AgentInput, runner: Awaited<ReturnType<typeof checkRunnerConfig>>, createdAt: number): Promise<NewAgentRow> {
  const runnerConfig = await sealSecretFields(db.secrets, input.runner_config, runner.secrets, runner.kept, agentConfigSlot({ agentId, runnerId: input.runner_id }, runner.serviceBaseUrl));
  return {
    agentId,
    name: input.name,
    description: input.description ?? null,
    runnerId: input.runner_id,
    runnerConfigJson: JSON.stringify(runnerConfig),
    eventTypesJson: JSON.stringify([...new Set(input.event_types)]),
    ...storedScope(input.scope),
    resourcePolicyJson: JSON.stringify(input.resource_policy),
    statePolicyJson: JSON.stringify(input.state_policy),
    deliveryPolicyJson: JSON.stringify(input.delivery_policy),
    triggerPolicyJson: JSON.stringify(input.trigger_policy),
    concurrencyJson: JSON.stringify(input.concurrency),
    enabled: input.enabled,
    // A fresh one for a created agent; a replaced one keeps its own (agentsStore.replace).
    stateEpoch: newId("epoch"),
    createdAt,
    updatedAt: Date.now(),
  };
}

/** A write that did not apply because what it was built from changed meanwhile (`updatedAt`: the agent's now, when it is there). */
const agentChangedMeanwhile = (agentId: string, updatedAt?: number) => {
  const message = `agent ${agentId} or its runner's service changed while this request was handled (another write, a move, a reseal); read it again and retry`;
  return updatedAt === undefined ? conflict(message) : changedMeanwhile(message, updatedAt);
};

async function save(write: () => Promise<boolean>): Promise<boolean> {
  try {
    return await write();
  } catch (err) {
    if (err instanceof BindingConflictError) throw conflict(err.message, { conflicts: err.conflicts.map((c) => ({ agent_id: c.agentId, event_type: c.eventType })) });
    throw err;
  }
}

/** `runs`: what a DELETE does to the agent's runs not ended: `cancel` them (the default), or `leave` them as they are. */
const AgentDeleteQuery = z.strictObject({ runs: z.enum(["cancel", "leave"]).default("cancel") });

/**
 * PUT replaces the agent with the same body as POST; what GET answered can be sent back as it is (`created_at` is
 * ignored; `updated_at`, when sent, must still be the stored one: checkReadAsStored). `enabled` left out keeps the agent's own: a pause is not configuration, and a PUT built without it (a
 * config file, a script) must not set a paused agent answering again.
 */
const AgentReplaceSchema = AgentInputSchema.extend({ created_at: z.string().optional(), updated_at: z.string().optional(), enabled: z.boolean().optional() });

export const agentsRouter = router()
  .get("/", validate("query", AdminListQuery), async (c) => {
    const db = dbOf(c.env);
    return listing(c, c.req.valid("query"), {
      kind: "agents",
      read: (page) => selectPage(db, agent, { time: agent.createdAt, id: agent.agentId }, page),
      position: (row) => ({ time: row.createdAt, id: row.agentId }),
      view: async (rows) => {
        const secrets = await secretsByRunner(db, rows);
        return rows.map((row) => toAgentView(row, secrets.get(row.runnerId) ?? "all"));
      },
    });
  })
  // runner_config is kept and handed to the runner as sent: a whole number parsing would round (past 64 bits too) is a 400.
  .post("/", jsonBody(AgentInputSchema, { exact: true }), async (c) => {
    const db = dbOf(c.env);
    const input = c.get("body");
    const checked = await checkRunnerConfig(db, input);
    await checkResourceGrants(db, input);
    const store = agentsStore(db);
    const agentId = input.agent_id ?? newId("agt");
    if (await store.get(agentId)) throw conflict(`agent ${agentId} already exists`);
    const row = await toRow(db, agentId, input, checked, Date.now());
    // A concurrent create of the same id passed the check above too: its insert is refused (409), not a 500.
    if (!(await insertUnique(() => save(() => store.create(row, checked.serviceBaseUrl)), `agent ${agentId}`))) throw agentChangedMeanwhile(agentId);
    return c.json(toAgentView((await store.get(agentId))!, checked.secrets), 201);
  })
  .get("/:agentId", async (c) => {
    const db = dbOf(c.env);
    const row = await agentsStore(db).get(c.req.param("agentId"));
    if (!row) throw notFound(`agent ${c.req.param("agentId")} not found`);
    const runner = await registryStore(db).getRunner(row.runnerId);
    return c.json(toAgentView(row, runner ? secretFieldNames(configSchemaOf(runner.manifestJson)) : "all"));
  })
  .put("/:agentId", jsonBody(AgentReplaceSchema, { exact: true }), async (c) => {
    const db = dbOf(c.env);
    const agentId = c.req.param("agentId");
    const body = c.get("body");
    if (body.agent_id && body.agent_id !== agentId) throw badRequest("agent_id in the body differs from the path");
    const store = agentsStore(db);
    const existing = await store.get(agentId);
    if (!existing) throw notFound(`agent ${agentId} not found`);
    checkReadAsStored(body.updated_at, existing.updatedAt, `agent ${agentId}`);
    const input: AgentInput = { ...body, enabled: body.enabled ?? existing.enabled };
    const checked = await checkRunnerConfig(db, input, existing);
    await checkResourceGrants(db, input);
    const row = { ...(await toRow(db, agentId, input, checked, existing.createdAt)), updatedAt: nextUpdatedAt(existing.updatedAt) };
    const written = await save(() => store.replace(row, existing, checked.serviceBaseUrl));
    // Deleted meanwhile (perhaps created anew under its id: not the agent this PUT read), or changed (only a write over
    // the row as read applies).
    const saved = await store.get(agentId);
    if (!saved || saved.stateEpoch !== existing.stateEpoch) throw notFound(`agent ${agentId} not found (deleted meanwhile)`);
    if (!written) throw agentChangedMeanwhile(agentId, saved.updatedAt);
    return c.json(toAgentView(saved, checked.secrets));
  })
  .delete("/:agentId", validate("query", AgentDeleteQuery), async (c) => {
    const store = agentsStore(dbOf(c.env));
    const agentId = c.req.param("agentId");
    const row = await store.get(agentId);
    if (!row) throw notFound(`agent ${agentId} not found`);
    // Deleted (and perhaps created anew) by another call meanwhile: that agent is not this DELETE's to remove.
    if (!(await store.remove(agentId, row.stateEpoch))) throw notFound(`agent ${agentId} not found (deleted meanwhile)`);
    // Its runs once it is gone: no event binds it meanwhile, and a queued run starting meanwhile fails host.agent_unavailable.
    const asCreated = { agentId, stateEpoch: row.stateEpoch };
    const runs = c.req.valid("query").runs === "leave" ? await leaveAgentRuns(c.env, asCreated) : await cancelAgentRuns(c.env, asCreated);
    return c.json({ agent_id: agentId, deleted: true, runs });
  });
