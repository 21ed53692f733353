/**
 * Secrets of host-held resources (API keys, tool and MCP headers) are written
 * once by the operator and then only ever used by the host itself: listings
 * mask them, and any text that came back from an upstream and is about to be
 * shown to a runner, the ledger or the logs is scrubbed of them first.
 */

export const MASK = "********";

export function maskHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.keys(headers).map((name) => [name, MASK]));
}

/** Shorter fragments are too common to scrub without mangling ordinary text. */
const MIN_SECRET_LENGTH = 6;

/**
 * The strings to scrub for a set of secret values: each value, and for
 * header values like `Bearer abc...` also the credential after the scheme.
 */
export function secretFragments(values: readonly (string | null | undefined)[]): string[] {
  const out = new Set<string>();
  for (const value of values) {
    if (!value) continue;
    if (value.length >= MIN_SECRET_LENGTH) out.add(value);
    // The scheme word ("Bearer", "Basic") is not secret; what follows it is.
    for (const part of value.trim().split(/\s+/).slice(1)) if (part.length >= MIN_SECRET_LENGTH) out.add(part);
  }
  // Longest first, so a value is scrubbed whole before its parts are looked for.
  return [...out].sort((a, b) => b.length - a.length);
}

export function redact(text: string, fragments: readonly string[]): string {
  let out = text;
  for (const f of fragments) if (out.includes(f)) out = out.split(f).join("[redacted]");
  return out;
}
