/**
 * Resources projected to a run (PROTOCOL.md §6): the run's effective access,
 * frozen before the run starts. Resource ids are opaque to runners.
 */
import * as z from "zod";
import { RecordSchema } from "./common";
import { PERMISSION_VALUES } from "./manifest";

// Resource operations reuse the §4 permission values: a run can only hold what a manifest may ask for.
export const ModelResourceSchema = z.object({
  model_id: z.string().min(1),
  name: z.string(),
  kind: z.enum(["llm", "rerank", "embedding"]),
  context_window: z.int().positive().nullish(),
  operations: z.array(z.enum(PERMISSION_VALUES.models)).default([]),
});
export type ModelResource = z.infer<typeof ModelResourceSchema>;

export const ToolResourceSchema = z.object({
  tool_name: z.string().min(1),
  description: z.string().default(""),
  parameters: RecordSchema.default({}), // JSON Schema of the tool's arguments
  operations: z.array(z.enum(PERMISSION_VALUES.tools)).default([]),
});
export type ToolResource = z.infer<typeof ToolResourceSchema>;

export const KnowledgeBaseResourceSchema = z.object({
  kb_id: z.string().min(1),
  name: z.string(),
  description: z.string().nullish(),
  operations: z.array(z.enum(PERMISSION_VALUES.knowledge_bases)).default([]),
});
export type KnowledgeBaseResource = z.infer<typeof KnowledgeBaseResourceSchema>;

export const SkillResourceSchema = z.object({
  skill_name: z.string().min(1),
  display_name: z.string().nullish(),
  description: z.string().nullish(),
});
export type SkillResource = z.infer<typeof SkillResourceSchema>;

export const FileResourceSchema = z.object({
  file_id: z.string().min(1),
  name: z.string(),
  mime_type: z.string().nullish(),
  size_bytes: z.int().nonnegative().nullish(),
});
export type FileResource = z.infer<typeof FileResourceSchema>;

export const StorageResourceSchema = z.object({
  plugin_storage: z.boolean().default(false),
  workspace_storage: z.boolean().default(false),
});
export type StorageResource = z.infer<typeof StorageResourceSchema>;

/** The run's effective access (§4, §6): only what is listed may be used. */
export const AgentResourcesSchema = z.object({
  models: z.array(ModelResourceSchema).default([]),
  tools: z.array(ToolResourceSchema).default([]),
  knowledge_bases: z.array(KnowledgeBaseResourceSchema).default([]),
  skills: z.array(SkillResourceSchema).default([]),
  files: z.array(FileResourceSchema).default([]),
  storage: StorageResourceSchema.default({ plugin_storage: false, workspace_storage: false }),
  platform_capabilities: RecordSchema.default({}),
});
export type AgentResources = z.infer<typeof AgentResourcesSchema>;
