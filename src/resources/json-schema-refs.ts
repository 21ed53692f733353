/**
 * Local `$ref`s and JSON Pointers in JSON Schemas: the subschema a `#...` reference points at, and the pointer to a
 * member of a value (for the validator's issues and the registration check's problems).
 */
import type { JsonSchema } from "./json-schema";
import { isObject } from "./json-values";

/** The subschema a local `$ref` (`#`, or `#` + a JSON pointer) points at in `root`; undefined when it does not resolve. */
export function resolveLocalRef(root: JsonSchema, ref: string): JsonSchema | undefined {
  if (!ref.startsWith("#")) return undefined;
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined;
  }
  if (fragment === "") return root;
  if (!fragment.startsWith("/")) return undefined; // `#anchor`: not supported
  let node: unknown = root;
  for (const token of fragment.slice(1).split("/")) {
    const key = token.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(node) && /^(0|[1-9][0-9]*)$/.test(key)) node = node[Number(key)];
    else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
    else return undefined;
  }
  return typeof node === "boolean" || isObject(node) ? node : undefined;
}

/** The JSON Pointer of `key` inside the value at `path`. */
export const pointer = (path: string, key: string | number) => `${path}/${String(key).replace(/~/g, "~0").replace(/\//g, "~1")}`;
