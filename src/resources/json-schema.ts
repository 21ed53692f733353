/**
 * A small JSON Schema validator for tool parameters. Workers forbid
 * `eval`/`new Function`, which rules out Ajv, and `@cfworker/json-schema` is
 * not a dependency here; so this interprets the subset tool schemas use:
 * type (incl. "integer" and type lists), properties, required,
 * additionalProperties, items, enum, const, anyOf/oneOf/allOf, not,
 * minimum/maximum (and exclusive forms), minLength/maxLength, pattern,
 * minItems/maxItems, uniqueItems, minProperties/maxProperties.
 * Other keywords ($ref, format, if/then, ...) are ignored, i.e. permissive.
 */

export type JsonSchema = boolean | { [keyword: string]: unknown };

export interface SchemaIssue {
  /** JSON Pointer of the offending value, "" for the root. */
  path: string;
  message: string;
}

const MAX_ISSUES = 20;
/** Deeper schemas or values are refused rather than recursed into. */
const MAX_DEPTH = 64;

type JsonType = "null" | "boolean" | "object" | "array" | "number" | "integer" | "string";

function typeOf(value: unknown): Exclude<JsonType, "integer"> | "undefined" {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  const t = typeof value;
  if (t === "boolean" || t === "number" || t === "string") return t;
  if (t === "object") return "object";
  return "undefined";
}

function hasType(value: unknown, type: string): boolean {
  if (type === "integer") return typeof value === "number" && Number.isInteger(value);
  return typeOf(value) === type;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Deep equality of JSON values (enum, const, uniqueItems). */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

const pointer = (path: string, key: string | number) => `${path}/${String(key).replace(/~/g, "~0").replace(/\//g, "~1")}`;
const num = (v: unknown): number | undefined => (typeof v === "number" ? v : undefined);

class Checker {
  readonly issues: SchemaIssue[] = [];
  private readonly patterns = new Map<string, RegExp | null>();

  private fail(path: string, message: string) {
    if (this.issues.length < MAX_ISSUES) this.issues.push({ path, message });
  }

  private regex(source: string): RegExp | null {
    if (!this.patterns.has(source)) {
      try {
        this.patterns.set(source, new RegExp(source, "u"));
      } catch {
        this.patterns.set(source, null); // an invalid pattern in the schema constrains nothing
      }
    }
    return this.patterns.get(source) ?? null;
  }

  /** Validate into `this.issues`; returns whether this value passed. */
  check(schema: JsonSchema, value: unknown, path: string, depth: number): boolean {
    const before = this.issues.length;
    if (schema === true || schema === undefined) return true;
    if (schema === false) {
      this.fail(path, "no value is allowed here");
      return false;
    }
    if (!isObject(schema)) return true;
    if (depth > MAX_DEPTH) {
      this.fail(path, `nested deeper than ${MAX_DEPTH} levels`);
      return false;
    }
    const s = schema;

    if (s.type !== undefined) {
      const types = (Array.isArray(s.type) ? s.type : [s.type]).filter((t): t is string => typeof t === "string");
      if (types.length && !types.some((t) => hasType(value, t))) {
        this.fail(path, `must be ${types.join(" or ")}, got ${typeOf(value)}`);
        return false;
      }
    }
    if (Array.isArray(s.enum) && !s.enum.some((e) => jsonEqual(e, value))) {
      this.fail(path, `must be one of ${JSON.stringify(s.enum)}`);
    }
    if (Object.hasOwn(s, "const") && !jsonEqual(s.const, value)) this.fail(path, `must equal ${JSON.stringify(s.const)}`);

    if (typeof value === "number") this.number(s, value, path);
    if (typeof value === "string") this.string(s, value, path);
    if (Array.isArray(value)) this.array(s, value, path, depth);
    if (isObject(value)) this.object(s, value, path, depth);
    this.combinators(s, value, path, depth);
    return this.issues.length === before;
  }

  private number(s: Record<string, unknown>, value: number, path: string) {
    const min = num(s.minimum);
    const max = num(s.maximum);
    const xmin = num(s.exclusiveMinimum);
    const xmax = num(s.exclusiveMaximum);
    if (min !== undefined && value < min) this.fail(path, `must be >= ${min}`);
    if (max !== undefined && value > max) this.fail(path, `must be <= ${max}`);
    if (xmin !== undefined && value <= xmin) this.fail(path, `must be > ${xmin}`);
    if (xmax !== undefined && value >= xmax) this.fail(path, `must be < ${xmax}`);
    const step = num(s.multipleOf);
    if (step !== undefined && step > 0 && !Number.isInteger(value / step)) this.fail(path, `must be a multiple of ${step}`);
  }

  private string(s: Record<string, unknown>, value: string, path: string) {
    const length = [...value].length; // code points, as JSON Schema counts
    const min = num(s.minLength);
    const max = num(s.maxLength);
    if (min !== undefined && length < min) this.fail(path, `must be at least ${min} characters`);
    if (max !== undefined && length > max) this.fail(path, `must be at most ${max} characters`);
    if (typeof s.pattern === "string") {
      const re = this.regex(s.pattern);
      if (re && !re.test(value)) this.fail(path, `must match ${s.pattern}`);
    }
  }

  private array(s: Record<string, unknown>, value: unknown[], path: string, depth: number) {
    const min = num(s.minItems);
    const max = num(s.maxItems);
    if (min !== undefined && value.length < min) this.fail(path, `must have at least ${min} items`);
    if (max !== undefined && value.length > max) this.fail(path, `must have at most ${max} items`);
    if (s.uniqueItems === true && value.some((v, i) => value.findIndex((w) => jsonEqual(v, w)) !== i)) this.fail(path, "items must be unique");
    // Draft 2020-12 `prefixItems` + `items`, and the older tuple form `items: [...]`.
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
    const rest = Array.isArray(s.items) ? s.additionalItems : s.items;
    value.forEach((item, i) => {
      const itemSchema = i < prefix.length ? prefix[i] : rest;
      if (itemSchema !== undefined) this.check(itemSchema as JsonSchema, item, pointer(path, i), depth + 1);
    });
  }

  private object(s: Record<string, unknown>, value: Record<string, unknown>, path: string, depth: number) {
    const properties = isObject(s.properties) ? s.properties : {};
    if (Array.isArray(s.required)) {
      for (const key of s.required) {
        if (typeof key === "string" && !Object.hasOwn(value, key)) this.fail(pointer(path, key), "is required");
      }
    }
    const count = Object.keys(value).length;
    const minP = num(s.minProperties);
    const maxP = num(s.maxProperties);
    if (minP !== undefined && count < minP) this.fail(path, `must have at least ${minP} properties`);
    if (maxP !== undefined && count > maxP) this.fail(path, `must have at most ${maxP} properties`);
    const patternProps = isObject(s.patternProperties) ? Object.entries(s.patternProperties) : [];
    for (const [key, v] of Object.entries(value)) {
      let matched = false;
      if (Object.hasOwn(properties, key)) {
        matched = true;
        this.check(properties[key] as JsonSchema, v, pointer(path, key), depth + 1);
      }
      for (const [source, sub] of patternProps) {
        if (this.regex(source)?.test(key)) {
          matched = true;
          this.check(sub as JsonSchema, v, pointer(path, key), depth + 1);
        }
      }
      if (!matched && s.additionalProperties !== undefined) {
        if (s.additionalProperties === false) this.fail(pointer(path, key), "is not an allowed property");
        else this.check(s.additionalProperties as JsonSchema, v, pointer(path, key), depth + 1);
      }
    }
  }

  /** Sub-checks whose own issues only matter through the combinator's verdict. */
  private trial(schema: unknown, value: unknown, path: string, depth: number): boolean {
    const probe = new Checker();
    return probe.check(schema as JsonSchema, value, path, depth + 1);
  }

  private combinators(s: Record<string, unknown>, value: unknown, path: string, depth: number) {
    if (Array.isArray(s.allOf)) for (const sub of s.allOf) this.check(sub as JsonSchema, value, path, depth + 1);
    if (Array.isArray(s.anyOf) && !s.anyOf.some((sub) => this.trial(sub, value, path, depth))) {
      this.fail(path, "must match at least one of the anyOf schemas");
    }
    if (Array.isArray(s.oneOf)) {
      const matches = s.oneOf.filter((sub) => this.trial(sub, value, path, depth)).length;
      if (matches !== 1) this.fail(path, `must match exactly one of the oneOf schemas (matched ${matches})`);
    }
    if (s.not !== undefined && this.trial(s.not, value, path, depth)) this.fail(path, "must not match the `not` schema");
  }
}

/** Validate `value` against `schema`; an empty list means valid. */
export function validateJsonSchema(schema: JsonSchema, value: unknown): SchemaIssue[] {
  const checker = new Checker();
  checker.check(schema, value, "", 0);
  return checker.issues;
}

export function formatSchemaIssues(issues: SchemaIssue[]): string {
  return issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
}

/**
 * The MCP SDK client's validator hook (`jsonSchemaValidator`): the SDK's
 * default is Ajv, which compiles schemas with `new Function` and fails in
 * workerd as soon as a server's tool declares an outputSchema.
 */
export const mcpSchemaValidator = {
  getValidator<T>(schema: unknown) {
    return (input: unknown) => {
      const issues = validateJsonSchema(schema as JsonSchema, input);
      return issues.length
        ? { valid: false as const, data: undefined, errorMessage: formatSchemaIssues(issues) }
        : { valid: true as const, data: input as T, errorMessage: undefined };
    };
  },
};
