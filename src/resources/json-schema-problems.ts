/**
 * The registration check of a JSON Schema (a tool's parameters): what in it the validator (./json-schema.ts) could not
 * interpret, found before the tool is stored rather than when an argument is checked.
 */
import { compilePattern } from "./ecma-pattern";
import { MAX_ISSUES, notARegex, unsupportedKeyword, type JsonSchema } from "./json-schema";
import { pointer, resolveLocalRef } from "./json-schema-refs";
import { isObject, MAX_DEPTH } from "./json-values";

/** Keywords whose value is one subschema, a list of them, or a map of them (drafts 4 to 2020-12). */
const ONE_SCHEMA = ["additionalProperties", "additionalItems", "items", "contains", "not", "if", "then", "else", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"];
const SCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];

/**
 * What makes a schema unusable here, for refusing it when a tool is
 * registered or discovered: patterns that compile neither with nor without
 * the `u` flag, `$ref`s that are not local or do not resolve, nesting deeper
 * than the validator goes. Empty when the schema is fine.
 */
export function schemaProblems(schema: JsonSchema): string[] {
  const problems: string[] = [];
  const add = (path: string, message: string) => {
    if (problems.length < MAX_ISSUES) problems.push(`${path || "(root)"}: ${message}`);
  };
  const walk = (node: unknown, path: string, depth: number) => {
    if (!isObject(node)) return;
    if (depth > MAX_DEPTH) return add(path, `nested deeper than ${MAX_DEPTH} levels`);
    const unsupported = unsupportedKeyword(node);
    if (unsupported) add(path, unsupported);
    if (typeof node.pattern === "string" && compilePattern(node.pattern) === null) add(pointer(path, "pattern"), notARegex(node.pattern));
    if (isObject(node.patternProperties)) {
      for (const source of Object.keys(node.patternProperties)) {
        if (compilePattern(source) === null) add(pointer(path, "patternProperties"), notARegex(source));
      }
    }
    if (node.$ref !== undefined) {
      if (typeof node.$ref !== "string") add(pointer(path, "$ref"), "must be a string");
      else if (!node.$ref.startsWith("#")) add(pointer(path, "$ref"), `${JSON.stringify(node.$ref)} is not a local reference (only "#..." within the schema is supported)`);
      else if (resolveLocalRef(schema, node.$ref) === undefined) add(pointer(path, "$ref"), `${JSON.stringify(node.$ref)} does not resolve within the schema`);
    }
    for (const key of ONE_SCHEMA) if (isObject(node[key])) walk(node[key], pointer(path, key), depth + 1);
    for (const key of SCHEMA_LISTS) {
      const list = node[key];
      if (Array.isArray(list)) list.forEach((sub, i) => walk(sub, pointer(pointer(path, key), i), depth + 1));
    }
    for (const key of SCHEMA_MAPS) {
      const map = node[key];
      if (isObject(map)) for (const [name, sub] of Object.entries(map)) walk(sub, pointer(pointer(path, key), name), depth + 1);
    }
  };
  walk(schema, "", 0);
  return problems;
}
