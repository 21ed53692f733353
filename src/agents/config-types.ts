import type { ConfigSchemaItem } from "../protocol/manifest";

/** What a value of each form item type LangBot's runner forms know must be; another type is the runner's own, unchecked. */
const EXPECTED: Record<string, { expected: string; holds: (value: unknown) => boolean }> = {
  string: { expected: "text", holds: (v) => typeof v === "string" },
  text: { expected: "text", holds: (v) => typeof v === "string" },
  integer: { expected: "a whole number", holds: (v) => typeof v === "number" && Number.isInteger(v) },
  float: { expected: "a number", holds: (v) => typeof v === "number" && Number.isFinite(v) },
  boolean: { expected: "true or false", holds: (v) => typeof v === "boolean" },
  "array[string]": { expected: "a list of texts", holds: (v) => Array.isArray(v) && v.every((s) => typeof s === "string") },
};

const optionNames = (item: ConfigSchemaItem) => (item.options ?? []).map((o) => (typeof o === "string" ? o : o.name));

/**
 * runner_config fields whose value is not of its config_schema type (null is
 * unset, checked as required or not elsewhere): what the runner would get as
 * `ctx.config` is what its form promised. A `select` takes one of its options'
 * names (any text when it lists none). Secret fields are checked as secrets.
 */
export function mistypedConfigFields(schema: readonly ConfigSchemaItem[] | undefined, config: Record<string, unknown>): { field: string; expected: string }[] {
  const out: { field: string; expected: string }[] = [];
  for (const item of schema ?? []) {
    const value = Object.hasOwn(config, item.name) ? config[item.name] : null;
    if (value === null) continue;
    if (item.type === "select") {
      const names = optionNames(item);
      if (typeof value !== "string" || (names.length > 0 && !names.includes(value))) out.push({ field: item.name, expected: names.length ? `one of ${names.map((n) => JSON.stringify(n)).join(", ")}` : "text" });
      continue;
    }
    const check = EXPECTED[item.type];
    if (check && !check.holds(value)) out.push({ field: item.name, expected: check.expected });
  }
  return out;
}
