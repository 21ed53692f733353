/**
 * A small JSON Schema validator for tool parameters. Workers forbid
 * `eval`/`new Function`, which rules out Ajv, and `@cfworker/json-schema` is
 * not a dependency here; so this interprets the subset tool schemas use:
 * type (incl. "integer" and type lists), properties, required,
 * additionalProperties, patternProperties, items/prefixItems, enum, const,
 * anyOf/oneOf/allOf, not, if/then/else, minimum/maximum (and exclusive
 * forms, draft-4 booleans included), multipleOf, minLength/maxLength, pattern,
 * minItems/maxItems, uniqueItems, contains/minContains/maxContains,
 * minProperties/maxProperties, propertyNames, dependentRequired,
 * dependentSchemas and draft-7 `dependencies`, and local `$ref` (`#`,
 * `#/$defs/...`, `#/definitions/...`, any JSON pointer). Annotations and
 * `format` are ignored, i.e. permissive.
 *
 * What it cannot interpret it does not let through silently: a schema whose
 * pattern RE2 cannot run (see compilePattern), whose $ref does not resolve
 * locally, or that uses unevaluatedProperties/unevaluatedItems, is refused at
 * registration (`schemaProblems`, ./json-schema-problems.ts), and fails closed
 * if one is met anyway.
 */

import { compilePattern, type Pattern } from "./ecma-pattern";
import { pointer, resolveLocalRef } from "./json-schema-refs";
import { canonicalJson, isObject, jsonEqual, MAX_DEPTH } from "./json-values";

export type JsonSchema = boolean | { [keyword: string]: unknown };

export interface SchemaIssue {
  /** JSON Pointer of the offending value, "" for the root. */
  path: string;
  message: string;
}

export const MAX_ISSUES = 20;
/** Schema applications per validation: combinators over recursive $refs cannot make it exponential. */
const MAX_STEPS = 100_000;

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

/** `value` is an integer multiple of `step`, allowing for binary floating point (0.07 of 0.01, 0.3 of 0.1). */
function isMultipleOf(value: number, step: number): boolean {
  if (Number.isInteger(value) && Number.isInteger(step)) return value % step === 0;
  const quotient = value / step;
  if (!Number.isFinite(quotient)) return false;
  return Math.abs(quotient - Math.round(quotient)) <= 1e-13 * Math.max(1, Math.abs(quotient));
}

/** Keywords that would need every other keyword's evaluation tracked: refused rather than ignored (ignored, they would let anything through). */
const UNEVALUATED = ["unevaluatedProperties", "unevaluatedItems"] as const;
export function unsupportedKeyword(s: Record<string, unknown>): string | null {
  const used = UNEVALUATED.find((k) => s[k] !== undefined && s[k] !== true && !(isObject(s[k]) && Object.keys(s[k]).length === 0));
  return used ? `${used} is not supported (additionalProperties / items say the same for most schemas)` : null;
}

export const notARegex = (source: string) => `pattern ${JSON.stringify(source)} is not a regular expression this host runs (patterns run in linear time: lookaround, backreferences and counted repeats over 1000 are not supported)`;
const invalidPattern = (source: string) => `the schema's ${notARegex(source)}`;

const num = (v: unknown): number | undefined => (typeof v === "number" ? v : undefined);

/** What one validation shares across its sub-checks: the root (for $ref), compiled patterns, the step budget. */
interface Validation {
  root: JsonSchema;
  patterns: Map<string, Pattern | null>;
  steps: number;
  /** The budget ran out, perhaps inside a trial (`not`, `if`, `anyOf`...) whose failure reads as "did not match". */
  exhausted?: boolean;
}

const TOO_COMPLEX = "the schema is too complex to check";
const TOO_DEEP = `nested deeper than ${MAX_DEPTH} levels`;
/** Schema applications nested in one another ($ref, allOf, trials...), at most: eight per level of the argument. */
const MAX_SCHEMA_HOPS = MAX_DEPTH * 8;
/** How deep in the argument a JSON Pointer is. */
const valueDepth = (path: string) => (path.match(/\//g) ?? []).length;

class Checker {
  readonly issues: SchemaIssue[] = [];

  constructor(private readonly v: Validation) {}

  private fail(path: string, message: string) {
    if (this.issues.length < MAX_ISSUES) this.issues.push({ path, message });
  }

  private regex(source: string): Pattern | null {
    if (!this.v.patterns.has(source)) this.v.patterns.set(source, compilePattern(source));
    return this.v.patterns.get(source) ?? null;
  }

  /** `text` matches `source`; a pattern that does not compile fails closed rather than matching nothing. */
  private matches(source: string, text: string, path: string): boolean {
    const re = this.regex(source);
    if (!re) this.fail(path, invalidPattern(source));
    return re !== null && re.test(text);
  }

  /** Validate into `this.issues`; returns whether this value passed. `hops`: schema applications nested so far. */
  check(schema: JsonSchema, value: unknown, path: string, hops: number): boolean {
    const before = this.issues.length;
    if (schema === true || schema === undefined) return true;
    if (schema === false) {
      this.fail(path, "no value is allowed here");
      return false;
    }
    if (!isObject(schema)) return true;
    // The argument's own nesting is bounded by MAX_DEPTH; schema hops ($ref, combinators) by a looser bound that only
    // stops $ref cycles. Either cut is fail-closed: inside a trial (`not`, `if`) it must not read as a mismatch.
    const cut = valueDepth(path) > MAX_DEPTH ? TOO_DEEP : hops > MAX_SCHEMA_HOPS ? TOO_COMPLEX : null;
    if (cut) {
      this.v.exhausted = true;
      this.fail(path, cut);
      return false;
    }
    if (++this.v.steps > MAX_STEPS) {
      this.v.exhausted = true;
      this.fail(path, TOO_COMPLEX);
      return false;
    }
    const s = schema;
    const unsupported = unsupportedKeyword(s);
    if (unsupported) {
      this.fail(path, `the schema's ${unsupported}`);
      return false;
    }

    if (typeof s.$ref === "string") {
      const target = resolveLocalRef(this.v.root, s.$ref);
      if (target === undefined) this.fail(path, `the schema's $ref ${JSON.stringify(s.$ref)} does not resolve`);
      // Sibling keywords apply as well (draft 2019-09 and later).
      else this.check(target, value, path, hops + 1);
    }

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
    if (Array.isArray(value)) this.array(s, value, path, hops);
    if (isObject(value)) this.object(s, value, path, hops);
    this.combinators(s, value, path, hops);
    return this.issues.length === before;
  }

  private number(s: Record<string, unknown>, value: number, path: string) {
    const min = num(s.minimum);
    const max = num(s.maximum);
    // Draft 4: `exclusiveMinimum: true` makes `minimum` exclusive; later drafts give the bound itself.
    const minExclusive = s.exclusiveMinimum === true;
    const maxExclusive = s.exclusiveMaximum === true;
    const xmin = num(s.exclusiveMinimum);
    const xmax = num(s.exclusiveMaximum);
    if (min !== undefined && (minExclusive ? value <= min : value < min)) this.fail(path, `must be ${minExclusive ? ">" : ">="} ${min}`);
    if (max !== undefined && (maxExclusive ? value >= max : value > max)) this.fail(path, `must be ${maxExclusive ? "<" : "<="} ${max}`);
    if (xmin !== undefined && value <= xmin) this.fail(path, `must be > ${xmin}`);
    if (xmax !== undefined && value >= xmax) this.fail(path, `must be < ${xmax}`);
    const step = num(s.multipleOf);
    if (step !== undefined && step > 0 && !isMultipleOf(value, step)) this.fail(path, `must be a multiple of ${step}`);
  }

  private string(s: Record<string, unknown>, value: string, path: string) {
    const length = [...value].length; // code points, as JSON Schema counts
    const min = num(s.minLength);
    const max = num(s.maxLength);
    if (min !== undefined && length < min) this.fail(path, `must be at least ${min} characters`);
    if (max !== undefined && length > max) this.fail(path, `must be at most ${max} characters`);
    if (typeof s.pattern === "string") {
      const re = this.regex(s.pattern);
      if (!re) this.fail(path, invalidPattern(s.pattern));
      else if (!re.test(value)) this.fail(path, `must match ${s.pattern}`);
    }
  }

  private array(s: Record<string, unknown>, value: unknown[], path: string, hops: number) {
    const min = num(s.minItems);
    const max = num(s.maxItems);
    if (min !== undefined && value.length < min) this.fail(path, `must have at least ${min} items`);
    if (max !== undefined && value.length > max) this.fail(path, `must have at most ${max} items`);
    if (s.uniqueItems === true) this.unique(value, path);
    if (s.contains !== undefined) {
      const found = value.filter((item, i) => this.trial(s.contains, item, pointer(path, i), hops)).length;
      const least = num(s.minContains) ?? 1;
      const most = num(s.maxContains);
      if (found < least) this.fail(path, `must contain at least ${least} matching item${least === 1 ? "" : "s"}`);
      if (most !== undefined && found > most) this.fail(path, `must contain at most ${most} matching items`);
    }
    // Draft 2020-12 `prefixItems` + `items`, and the older tuple form `items: [...]`.
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
    const rest = Array.isArray(s.items) ? s.additionalItems : s.items;
    value.forEach((item, i) => {
      const itemSchema = i < prefix.length ? prefix[i] : rest;
      if (itemSchema !== undefined) this.check(itemSchema as JsonSchema, item, pointer(path, i), hops + 1);
    });
  }

  /** One pass over canonical texts, not a comparison of every pair. */
  private unique(value: unknown[], path: string) {
    const seen = new Set<string>();
    for (const item of value) {
      const text = canonicalJson(item);
      if (text === undefined) return this.fail(path, `nested deeper than ${MAX_DEPTH} levels`);
      if (seen.has(text)) return this.fail(path, "items must be unique");
      seen.add(text);
    }
  }

  private object(s: Record<string, unknown>, value: Record<string, unknown>, path: string, hops: number) {
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
    // dependentRequired (2019-09+) and the array form of draft-4/7 `dependencies`; their schema forms apply to the whole object.
    for (const deps of [s.dependentRequired, s.dependencies]) {
      if (!isObject(deps)) continue;
      for (const [key, need] of Object.entries(deps)) {
        if (!Object.hasOwn(value, key)) continue;
        if (Array.isArray(need)) {
          for (const other of need) if (typeof other === "string" && !Object.hasOwn(value, other)) this.fail(pointer(path, other), `is required when ${key} is present`);
        } else if (need === false || isObject(need)) this.check(need as JsonSchema, value, path, hops + 1);
      }
    }
    if (isObject(s.dependentSchemas)) for (const [key, sub] of Object.entries(s.dependentSchemas)) if (Object.hasOwn(value, key)) this.check(sub as JsonSchema, value, path, hops + 1);
    if (s.propertyNames !== undefined) for (const key of Object.keys(value)) this.check(s.propertyNames as JsonSchema, key, pointer(path, key), hops + 1);
    const patternProps = isObject(s.patternProperties) ? Object.entries(s.patternProperties) : [];
    for (const [key, v] of Object.entries(value)) {
      let matched = false;
      if (Object.hasOwn(properties, key)) {
        matched = true;
        this.check(properties[key] as JsonSchema, v, pointer(path, key), hops + 1);
      }
      for (const [source, sub] of patternProps) {
        if (this.matches(source, key, pointer(path, key))) {
          matched = true;
          this.check(sub as JsonSchema, v, pointer(path, key), hops + 1);
        }
      }
      if (!matched && s.additionalProperties !== undefined) {
        if (s.additionalProperties === false) this.fail(pointer(path, key), "is not an allowed property");
        else this.check(s.additionalProperties as JsonSchema, v, pointer(path, key), hops + 1);
      }
    }
  }

  /** Sub-checks whose own issues only matter through the combinator's verdict. */
  private trial(schema: unknown, value: unknown, path: string, hops: number): boolean {
    const probe = new Checker(this.v);
    return probe.check(schema as JsonSchema, value, path, hops + 1);
  }

  private combinators(s: Record<string, unknown>, value: unknown, path: string, hops: number) {
    if (Array.isArray(s.allOf)) for (const sub of s.allOf) this.check(sub as JsonSchema, value, path, hops + 1);
    if (Array.isArray(s.anyOf) && !s.anyOf.some((sub) => this.trial(sub, value, path, hops))) {
      this.fail(path, "must match at least one of the anyOf schemas");
    }
    if (Array.isArray(s.oneOf)) {
      const matches = s.oneOf.filter((sub) => this.trial(sub, value, path, hops)).length;
      if (matches !== 1) this.fail(path, `must match exactly one of the oneOf schemas (matched ${matches})`);
    }
    if (s.not !== undefined && this.trial(s.not, value, path, hops)) this.fail(path, "must not match the `not` schema");
    if (s.if !== undefined) {
      const branch = this.trial(s.if, value, path, hops) ? s.then : s.else;
      if (branch !== undefined) this.check(branch as JsonSchema, value, path, hops + 1);
    }
  }
}

/** Validate `value` against `schema`; an empty list means valid. */
export function validateJsonSchema(schema: JsonSchema, value: unknown): SchemaIssue[] {
  const validation: Validation = { root: schema, patterns: new Map(), steps: 0 };
  const checker = new Checker(validation);
  checker.check(schema, value, "", 0);
  // Fails closed: a trial cut short says nothing about the value (a `not` or an `if` would read it as a mismatch).
  if (validation.exhausted && !checker.issues.some((i) => i.message === TOO_COMPLEX || i.message === TOO_DEEP)) return [...checker.issues, { path: "", message: TOO_COMPLEX }];
  return checker.issues;
}

export function formatSchemaIssues(issues: SchemaIssue[]): string {
  return issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
}
