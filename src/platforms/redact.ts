import { redact, secretFragments } from "../resources/secrets";

/**
 * A copy of a raw platform payload without the fields that carry secrets
 * (verification tokens, interaction tokens), by path. Raw payloads are kept
 * in R2 for audit; credentials are not.
 */
export function withoutPaths(raw: unknown, paths: string[][]): unknown {
  if (!isObject(raw)) return raw;
  const copy: Record<string, unknown> = structuredClone(raw);
  for (const path of paths) {
    let node: unknown = copy;
    for (const step of path.slice(0, -1)) node = isObject(node) ? node[step] : undefined;
    if (isObject(node)) delete node[path[path.length - 1]];
  }
  return copy;
}

const isObject = (v: unknown): v is Record<string, unknown> => Boolean(v) && typeof v === "object" && !Array.isArray(v);

/**
 * A copy of a raw platform payload without any field named one of `keys`, however deep (in arrays too), for a platform
 * whose secrets are known by name but not by place (Slack: a workflow step's `bot_access_token`, a user context's
 * `secret` inside a function's inputs). The other fields keep their order. Walked without recursion: no nesting depth
 * a payload may have overflows the stack.
 */
export function withoutKeys(raw: unknown, keys: readonly string[]): unknown {
  if (!raw || typeof raw !== "object") return raw;
  const names = new Set(keys);
  const copy = structuredClone(raw) as object;
  const pending: unknown[] = [copy];
  while (pending.length > 0) {
    const node = pending.pop();
    if (!node || typeof node !== "object") continue;
    if (Array.isArray(node)) {
      for (const item of node) pending.push(item);
      continue;
    }
    const record = node as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      if (names.has(key)) delete record[key];
      else pending.push(record[key]);
    }
  }
  return copy;
}

/**
 * Text (an error from a platform, say) with every credential value of the bot replaced, before it is recorded or
 * answered: the scrubber of host-held resources' answers, so a value is caught as it is, JSON-escaped or
 * percent-encoded (a platform quoting the URL it was called at). Very short values are not looked for.
 */
export function scrubSecrets(text: string, credentials: Record<string, string | undefined>): string {
  return redact(text, secretFragments(Object.values(credentials)));
}
