/** JSON values compared and written canonically, for the schema validator's enum, const and uniqueItems. */

/** Deeper schemas or values (or longer $ref chains) are refused rather than recursed into; here, never equal and without canonical text. */
export const MAX_DEPTH = 64;

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Deep equality of JSON values (enum, const); values nested deeper than MAX_DEPTH are never equal. */
export function jsonEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (a === b) return true;
  if (depth > MAX_DEPTH) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i], depth + 1));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k], depth + 1));
  }
  return false;
}

/** Canonical JSON (object keys sorted), so equal values have equal text; undefined when nested deeper than MAX_DEPTH. */
export function canonicalJson(value: unknown, depth = 0): string | undefined {
  if (depth > MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    const parts: string[] = [];
    for (const item of value) {
      const part = canonicalJson(item, depth + 1);
      if (part === undefined) return undefined;
      parts.push(part);
    }
    return `[${parts.join(",")}]`;
  }
  if (isObject(value)) {
    const parts: string[] = [];
    for (const key of Object.keys(value).sort()) {
      const part = canonicalJson(value[key], depth + 1);
      if (part === undefined) return undefined;
      parts.push(`${JSON.stringify(key)}:${part}`);
    }
    return `{${parts.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
