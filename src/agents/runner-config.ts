import type { ConfigSchemaItem } from "../protocol/manifest";
import { MASK } from "../resources/secrets";
import { isSealed, sealValues, type SecretBox, type SecretSlot } from "../lib/secret-box";

/**
 * The required fields of a runner's config_schema that an agent's
 * runner_config does not give (given means the config's own field, not null;
 * a field with a default needs nothing, and a null default is none).
 */
export function missingConfigFields(schema: readonly ConfigSchemaItem[] | undefined, config: Record<string, unknown>): string[] {
  return (schema ?? [])
    .filter((item) => item.required && item.default == null && (!Object.hasOwn(config, item.name) || config[item.name] === null))
    .map((item) => item.name);
}

/** `ctx.config`: the agent's runner_config with the schema's default for each field it leaves out (absent or null, as above). */
export function withConfigDefaults(config: Record<string, unknown>, defaults: Record<string, unknown> = {}): Record<string, unknown> {
  const filled = { ...config };
  for (const [name, value] of Object.entries(defaults)) if (filled[name] === undefined || filled[name] === null) filled[name] = value;
  return filled;
}

/** The fields a config_schema marks as secrets (`type: "secret"`). */
export function secretFieldNames(schema: readonly ConfigSchemaItem[] | undefined): Set<string> {
  return new Set((schema ?? []).filter((item) => item.type === "secret").map((item) => item.name));
}

/**
 * runner_config as an operator sees it: each secret field that holds a value
 * shows MASK. "all" when the runner is no longer registered, so which fields
 * it declared secret is unknown.
 */
export function maskSecretFields(config: Record<string, unknown>, secrets: ReadonlySet<string> | "all"): Record<string, unknown> {
  // A sealed value is masked whatever the runner declares now (a field it no longer calls secret).
  const secret = (name: string, value: unknown) => secrets === "all" || secrets.has(name) || isSealed(value);
  return Object.fromEntries(Object.entries(config).map(([name, value]) => [name, secret(name, value) && value !== null ? MASK : value]));
}

/**
 * runner_config as stored: its secret fields' values sealed for the agent and its runner (non-secret fields stay
 * readable). `kept`: the fields restoreSecretFields kept as stored, sealed already; any other value is sealed as
 * given, also one that merely looks sealed.
 */
export async function sealSecretFields(box: SecretBox, config: Record<string, unknown>, secrets: ReadonlySet<string>, kept: ReadonlySet<string>, slot: Omit<SecretSlot, "name">): Promise<Record<string, unknown>> {
  const sealed = await sealValues(box, Object.fromEntries(Object.entries(config).filter(([name]) => secrets.has(name) && !kept.has(name))), slot);
  return { ...config, ...sealed };
}

/**
 * Fields not typed secret given a value that looks sealed: the host would try to open it for the runner and fail
 * the run. No view ever shows a sealed value, so such a value never comes from this host.
 */
export const sealedLookingFields = (config: Record<string, unknown>, secrets: ReadonlySet<string>, kept: ReadonlySet<string>) =>
  Object.entries(config)
    .filter(([name, value]) => !secrets.has(name) && !kept.has(name) && isSealed(value))
    .map(([name]) => name);

/** Secret fields given a value that is not a string (or null): a secret is text, and only text is sealed. */
export const nonTextSecretFields = (config: Record<string, unknown>, secrets: ReadonlySet<string>) =>
  Object.entries(config)
    .filter(([name, value]) => secrets.has(name) && value !== null && typeof value !== "string")
    .map(([name]) => name);

/**
 * runner_config as written back: a secret field given as MASK (what GET
 * showed) keeps the value stored for it, as stored (sealed), so an agent read and sent back
 * unchanged keeps its secrets; so does any field whose stored value is sealed (GET masks it too, even once its
 * runner no longer calls it secret). Masked fields that have nothing stored
 * to keep are listed in `unknown`: the mask itself must never become the secret.
 */
export function restoreSecretFields(config: Record<string, unknown>, stored: Record<string, unknown> | null, secrets: ReadonlySet<string>): { config: Record<string, unknown>; kept: Set<string>; unknown: string[] } {
  const unknown: string[] = [];
  const kept = new Set<string>();
  const restored = Object.fromEntries(
    Object.entries(config).map(([name, value]) => {
      if (value !== MASK || !(secrets.has(name) || isSealed(stored?.[name]))) return [name, value];
      if (stored && Object.hasOwn(stored, name) && stored[name] !== null) {
        // Kept sealed as it is; a value stored before its field was secret is sealed now, as given.
        if (isSealed(stored[name])) kept.add(name);
        return [name, stored[name]];
      }
      unknown.push(name);
      return [name, value];
    }),
  );
  return { config: restored, kept, unknown };
}

/**
 * Fields sent back as MASK that GET masked on the agent's previous runner (`previousSecrets`: its secret field names):
 * their stored value is sealed for that runner and does not follow the agent to another one, so unless the new runner
 * keeps it (restoreSecretFields), the mask itself would become the value.
 */
export const maskedOnPreviousRunner = (config: Record<string, unknown>, previous: Record<string, unknown>, previousSecrets: ReadonlySet<string>) =>
  Object.entries(config)
    .filter(([name, value]) => value === MASK && Object.hasOwn(previous, name) && previous[name] !== null && (previousSecrets.has(name) || isSealed(previous[name])))
    .map(([name]) => name);
