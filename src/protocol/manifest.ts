/**
 * Runner discovery (PROTOCOL.md §2, §4): what `GET {base_url}/manifest` returns.
 */
import * as z from "zod";
import { formatZodIssues, I18nSchema, RecordSchema } from "./common";

export const PROTOCOL_ID = "agent-runner/v1";

/** Runner name: it becomes a URL path segment and part of the runner id. */
export const RUNNER_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]*$/;
/** Author and service name: they become part of the runner id `http:{author}/{name}/{runner}`. */
export const SERVICE_NAME_PATTERN = /^[a-z0-9][a-z0-9_.-]*$/i;

/** The §4 permission table: group -> operations a manifest may ask for. */
export const PERMISSION_VALUES = {
  models: ["invoke", "stream", "rerank"],
  tools: ["detail", "call"],
  knowledge_bases: ["list", "retrieve"],
  history: ["page", "search"],
  events: ["get", "page"],
  artifacts: ["metadata", "read"],
  storage: ["plugin", "workspace"],
  files: ["config", "knowledge"],
} as const;
export type PermissionGroup = keyof typeof PERMISSION_VALUES;
export type PermissionValue<G extends PermissionGroup> = (typeof PERMISSION_VALUES)[G][number];
export const PERMISSION_GROUPS = Object.keys(PERMISSION_VALUES) as PermissionGroup[];

const permissionList = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.array(z.enum(values)).optional();

/** Upper bound a runner asks for; unknown groups or operations are refused, not ignored. */
export const PermissionsSchema = z.strictObject({
  models: permissionList(PERMISSION_VALUES.models),
  tools: permissionList(PERMISSION_VALUES.tools),
  knowledge_bases: permissionList(PERMISSION_VALUES.knowledge_bases),
  history: permissionList(PERMISSION_VALUES.history),
  events: permissionList(PERMISSION_VALUES.events),
  artifacts: permissionList(PERMISSION_VALUES.artifacts),
  storage: permissionList(PERMISSION_VALUES.storage),
  files: permissionList(PERMISSION_VALUES.files),
});
export type Permissions = z.infer<typeof PermissionsSchema>;

export const CAPABILITY_NAMES = [
  "streaming",
  "tool_calling",
  "knowledge_retrieval",
  "multimodal_input",
  "skill_authoring",
  "interrupt",
  "steering",
] as const;
export type CapabilityName = (typeof CAPABILITY_NAMES)[number];

/** Typed booleans (absent = false); unknown keys are refused so typos never pass silently. */
export const CapabilitiesSchema = z.strictObject({
  streaming: z.boolean().optional(),
  tool_calling: z.boolean().optional(),
  knowledge_retrieval: z.boolean().optional(),
  multimodal_input: z.boolean().optional(),
  skill_authoring: z.boolean().optional(),
  interrupt: z.boolean().optional(),
  steering: z.boolean().optional(),
});
export type Capabilities = z.infer<typeof CapabilitiesSchema>;

const LabelSchema = z.union([I18nSchema, z.string()]);

export const ConfigOptionSchema = z.union([
  z.string(),
  z.looseObject({ name: z.string().min(1), label: LabelSchema.nullish() }),
]);

/**
 * One item of the agent's `runner_config` form. Loose: form renderers grow
 * extra keys (placeholder, show_if, ...) and those must not disqualify a runner.
 */
export const ConfigSchemaItemSchema = z.looseObject({
  name: z.string().min(1),
  type: z.string().min(1),
  label: LabelSchema,
  required: z.boolean().nullish(),
  default: z.unknown().optional(),
  options: z.array(ConfigOptionSchema).nullish(),
  description: LabelSchema.nullish(),
});
export type ConfigSchemaItem = z.infer<typeof ConfigSchemaItemSchema>;

export const AgentRunnerManifestSchema = z.object({
  name: z.string().min(1).max(64).regex(RUNNER_NAME_PATTERN),
  label: I18nSchema,
  description: I18nSchema.nullish(),
  capabilities: CapabilitiesSchema.default({}),
  permissions: PermissionsSchema.default({}),
  config_schema: z.array(ConfigSchemaItemSchema).default([]),
  metadata: RecordSchema.nullish(),
});
export type AgentRunnerManifest = z.infer<typeof AgentRunnerManifestSchema>;

/** The service document. `runners` stays unknown[] so one bad runner cannot hide the others. */
export const RunnerServiceManifestSchema = z.object({
  protocol: z.literal(PROTOCOL_ID),
  author: z.string().min(1).max(128).regex(SERVICE_NAME_PATTERN),
  name: z.string().min(1).max(128).regex(SERVICE_NAME_PATTERN),
  version: z.string().min(1).max(64),
  runners: z.array(z.unknown()),
  metadata: RecordSchema.nullish(),
});
export type RunnerServiceManifest = z.infer<typeof RunnerServiceManifestSchema>;

export interface SkippedRunner {
  index: number;
  /** The runner's `name` when it had a string one, for the warning. */
  name?: string | undefined;
  issues: string;
}

export type ParsedServiceManifest =
  | {
      ok: true;
      service: RunnerServiceManifest;
      runners: AgentRunnerManifest[];
      skipped: SkippedRunner[];
    }
  | { ok: false; issues: string };

/**
 * Validate the service document, then each runner on its own (§2): invalid
 * runners are reported in `skipped` while the valid ones are still returned.
 * Duplicate runner names are skipped after the first, as ids must be unique.
 */
export function parseRunnerServiceManifest(raw: unknown): ParsedServiceManifest {
  const service = RunnerServiceManifestSchema.safeParse(raw);
  if (!service.success) return { ok: false, issues: formatZodIssues(service.error) };
  const runners: AgentRunnerManifest[] = [];
  const skipped: SkippedRunner[] = [];
  const seen = new Set<string>();
  service.data.runners.forEach((candidate, index) => {
    const rawName =
      typeof candidate === "object" && candidate !== null && "name" in candidate
        ? candidate.name
        : undefined;
    const name = typeof rawName === "string" ? rawName : undefined;
    const parsed = AgentRunnerManifestSchema.safeParse(candidate);
    if (!parsed.success) {
      skipped.push({ index, name, issues: formatZodIssues(parsed.error) });
    } else if (seen.has(parsed.data.name)) {
      skipped.push({ index, name, issues: `duplicate runner name "${parsed.data.name}"` });
    } else {
      seen.add(parsed.data.name);
      runners.push(parsed.data);
    }
  });
  return { ok: true, service: service.data, runners, skipped };
}

/** The host's stable runner id (§2), e.g. `http:acme/support-bot/default`. */
export function formatRunnerId(author: string, service: string, runner: string): string {
  return `http:${author}/${service}/${runner}`;
}
