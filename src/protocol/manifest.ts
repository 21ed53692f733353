/**
 * Runner discovery (PROTOCOL.md §2, §4): what `GET {base_url}/manifest` returns.
 */
import * as z from "zod";
import { formatZodIssues, I18nSchema, orDefault, RecordSchema } from "./common";

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

/** null is absent (a Python SDK dumps an unset list as None), as everywhere in the protocol (common.ts). */
const absentIfNull = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === null ? undefined : v), schema.optional());

/** Unknown groups or operations are refused, not ignored; `nullIsAbsent` for what runners send (a manifest). */
function permissionsSchema(nullIsAbsent: boolean) {
  const list = <const T extends readonly [string, ...string[]]>(values: T) => (nullIsAbsent ? absentIfNull(z.array(z.enum(values))) : z.array(z.enum(values)).optional());
  return z.strictObject({
    models: list(PERMISSION_VALUES.models),
    tools: list(PERMISSION_VALUES.tools),
    knowledge_bases: list(PERMISSION_VALUES.knowledge_bases),
    history: list(PERMISSION_VALUES.history),
    events: list(PERMISSION_VALUES.events),
    artifacts: list(PERMISSION_VALUES.artifacts),
    storage: list(PERMISSION_VALUES.storage),
    files: list(PERMISSION_VALUES.files),
  });
}

/** Upper bound a runner asks for. */
export const PermissionsSchema = permissionsSchema(true);
/**
 * What an agent's policy allows (`resource_policy.allow`): an omitted group keeps the manifest's request, so a
 * group sent as null is refused rather than read as omitted, which would widen what the operator meant to narrow.
 */
export const AllowedPermissionsSchema = permissionsSchema(false);
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
const flag = absentIfNull(z.boolean());
export const CapabilitiesSchema = z.strictObject({
  streaming: flag,
  tool_calling: flag,
  knowledge_retrieval: flag,
  multimodal_input: flag,
  skill_authoring: flag,
  interrupt: flag,
  steering: flag,
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
  capabilities: orDefault(CapabilitiesSchema, {}),
  permissions: orDefault(PermissionsSchema, {}),
  config_schema: orDefault(z.array(ConfigSchemaItemSchema), []),
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

/**
 * Runners one manifest may list, valid or not: each is a row the registry keeps and lists, so a service listing
 * thousands is refused whole rather than registered (or checked) one by one.
 */
export const MAX_RUNNERS_PER_MANIFEST = 100;

export type ParsedServiceManifest =
  | {
      ok: true;
      service: RunnerServiceManifest;
      runners: AgentRunnerManifest[];
      skipped: SkippedRunner[];
    }
  | { ok: false; issues: string; /** Set when it lists more than MAX_RUNNERS_PER_MANIFEST runners: how many. */ runnerCount?: number };

/**
 * Validate the service document, then each runner on its own (§2): invalid
 * runners are reported in `skipped` while the valid ones are still returned.
 * Duplicate runner names are skipped after the first, as ids must be unique.
 */
export function parseRunnerServiceManifest(raw: unknown): ParsedServiceManifest {
  const service = RunnerServiceManifestSchema.safeParse(raw);
  if (!service.success) return { ok: false, issues: formatZodIssues(service.error) };
  const runnerCount = service.data.runners.length;
  if (runnerCount > MAX_RUNNERS_PER_MANIFEST) return { ok: false, issues: `runners: ${runnerCount} listed, more than the ${MAX_RUNNERS_PER_MANIFEST} a manifest may list`, runnerCount };
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
