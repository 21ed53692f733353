import type { ConfigSchemaItem } from "../protocol/manifest";

/**
 * The required fields of a runner's config_schema that an agent's
 * runner_config does not give (given means the config's own field, not null;
 * a field with a default needs nothing).
 */
export function missingConfigFields(schema: readonly ConfigSchemaItem[] | undefined, config: Record<string, unknown>): string[] {
  return (schema ?? [])
    .filter((item) => item.required && item.default === undefined && (!Object.hasOwn(config, item.name) || config[item.name] === null))
    .map((item) => item.name);
}
