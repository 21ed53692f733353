import type { ResourcePolicy } from "../agents/policy";
import { batchAll, type Db } from "../db/client";
import { parseJson } from "../lib/json";
import type { Permissions } from "../protocol/manifest";
import type { KnowledgeBaseResource, ModelResource, ToolResource } from "../protocol/resources";
import { knowledgeStore, type KnowledgeBaseDescriptor } from "./knowledge-store";
import { modelsStore, type ModelDescriptor } from "./models-store";
import { toolsStore, type ToolDescriptor } from "./tools-store";

/** Non-secret facts of the resources an agent grants, read once at run start. */
export interface ResourceDescriptors {
  models: ModelDescriptor[];
  tools: ToolDescriptor[];
  knowledgeBases: KnowledgeBaseDescriptor[];
}

export const NO_RESOURCE_DESCRIPTORS: ResourceDescriptors = { models: [], tools: [], knowledgeBases: [] };

/** The run's host-held resources (§6), as frozen into its snapshot and shown in `ctx.resources`. */
export interface GrantedResources {
  models: ModelResource[];
  tools: ToolResource[];
  knowledge_bases: KnowledgeBaseResource[];
  /** Granted model ids to try, in order, when a model call fails on the provider's side. */
  fallback_models: string[];
}

const grantedModelIds = (policy: ResourcePolicy) => [...new Set([...policy.models, ...policy.fallback_models])];

/**
 * The reads of the agent's grants, to join another batch (a run's claim);
 * none when it grants nothing. `descriptorsFrom` reads their results back.
 */
export function resourceDescriptorQueries(db: Db, policy: ResourcePolicy) {
  const modelIds = grantedModelIds(policy);
  if (!modelIds.length && !policy.tools.length && !policy.knowledge_bases.length) return [];
  return [modelsStore(db).descriptors(modelIds), toolsStore(db).descriptors(policy.tools), knowledgeStore(db).descriptors(policy.knowledge_bases)] as const;
}

export function descriptorsFrom(results: readonly unknown[]): ResourceDescriptors {
  if (!results.length) return NO_RESOURCE_DESCRIPTORS;
  // Positional results of resourceDescriptorQueries, in its order.
  const [models, tools, knowledgeBases] = results as [ModelDescriptor[], ToolDescriptor[], KnowledgeBaseDescriptor[]];
  return { models, tools, knowledgeBases };
}

/** One libSQL round trip for the agent's grants; none when it grants nothing. */
async function loadResourceDescriptors(db: Db, policy: ResourcePolicy): Promise<ResourceDescriptors> {
  const queries = resourceDescriptorQueries(db, policy);
  return descriptorsFrom(queries.length ? await batchAll(db, [...queries]) : []);
}

/** What each model kind can be used for through the Host API. */
const OPERATIONS_OF_KIND: Record<string, readonly string[]> = { llm: ["invoke", "stream"], rerank: ["rerank"], embedding: [] };

function intersect<T extends string>(asked: readonly T[] | undefined, possible: readonly string[]): T[] {
  return (asked ?? []).filter((op) => possible.includes(op));
}

/**
 * effective access = manifest permissions (already narrowed by the policy's
 * `allow`) ∩ the resources the agent grants by id ∩ what each resource can do.
 * A resource left with no operation is not listed; a granted id that no
 * longer exists is simply absent. Policy order is kept.
 */
export function grantResources(permissions: Permissions, policy: ResourcePolicy, found: ResourceDescriptors): GrantedResources {
  const byId = <T, K extends keyof T>(rows: T[], key: K) => new Map(rows.map((r) => [r[key] as string, r]));
  const models = byId(found.models, "modelId");
  const tools = byId(found.tools, "toolName");
  const kbs = byId(found.knowledgeBases, "kbId");

  const modelGrants: ModelResource[] = [];
  for (const id of grantedModelIds(policy)) {
    const m = models.get(id);
    const operations = m ? intersect(permissions.models, OPERATIONS_OF_KIND[m.kind] ?? []) : [];
    if (m && operations.length) {
      modelGrants.push({ model_id: m.modelId, name: m.name, kind: m.kind as ModelResource["kind"], context_window: m.contextWindow, operations });
    }
  }
  const toolOps = intersect(permissions.tools, ["detail", "call"]);
  const toolGrants: ToolResource[] = toolOps.length
    ? policy.tools.flatMap((name) => {
        const t = tools.get(name);
        return t ? [{ tool_name: t.toolName, description: t.description, parameters: parseJson<Record<string, unknown>>(t.parametersJson, {}), operations: toolOps }] : [];
      })
    : [];
  const kbOps = intersect(permissions.knowledge_bases, ["list", "retrieve"]);
  const kbGrants: KnowledgeBaseResource[] = kbOps.length
    ? policy.knowledge_bases.flatMap((id) => {
        const k = kbs.get(id);
        return k ? [{ kb_id: k.kbId, name: k.name, description: k.description, operations: kbOps }] : [];
      })
    : [];
  const usable = new Set(modelGrants.map((m) => m.model_id));
  return {
    models: modelGrants,
    tools: toolGrants,
    knowledge_bases: kbGrants,
    fallback_models: policy.fallback_models.filter((id) => usable.has(id)),
  };
}

/** Which resource each granted id named when the run started (its `createdAt`), by kind. */
export interface ResourceIdentities {
  models: Record<string, number>;
  tools: Record<string, number>;
  knowledge_bases: Record<string, number>;
}

/** The identities of the resources `granted` lists, as `found` read them. */
export function identitiesOf(granted: GrantedResources, found: ResourceDescriptors): ResourceIdentities {
  const pick = <T extends { createdAt: number }>(rows: T[], idOf: (r: T) => string, ids: string[]) => {
    const wanted = new Set(ids);
    return Object.fromEntries(rows.filter((r) => wanted.has(idOf(r))).map((r) => [idOf(r), r.createdAt]));
  };
  return {
    models: pick(found.models, (m) => m.modelId, granted.models.map((m) => m.model_id)),
    tools: pick(found.tools, (t) => t.toolName, granted.tools.map((t) => t.tool_name)),
    knowledge_bases: pick(found.knowledgeBases, (k) => k.kbId, granted.knowledge_bases.map((k) => k.kb_id)),
  };
}

/** Ids an agent grants that are not registered (refused when the agent is saved). */
export async function unknownGrants(db: Db, policy: ResourcePolicy): Promise<string[]> {
  const found = await loadResourceDescriptors(db, policy);
  const missing = (kind: string, ids: string[], have: Set<string>) => ids.filter((id) => !have.has(id)).map((id) => `${kind} ${id}`);
  return [
    ...missing("model", grantedModelIds(policy), new Set(found.models.map((m) => m.modelId))),
    ...missing("tool", policy.tools, new Set(found.tools.map((t) => t.toolName))),
    ...missing("knowledge base", policy.knowledge_bases, new Set(found.knowledgeBases.map((k) => k.kbId))),
  ];
}
