/**
 * Secrets of host-held resources (API keys, tool and MCP headers, tokens in
 * endpoint URLs) are written once by the operator and then only ever used by
 * the host itself: listings mask them, and any text that came back from an
 * upstream and is about to be shown to a runner, the ledger or the logs is
 * scrubbed of them first.
 */

import { keptIntegerText } from "../lib/exact-json";
import { REDACTED, scrub, type TextCut } from "../lib/scrub";
import { matcherOf } from "../lib/secret-matcher";
import { StreamScrubber } from "../lib/stream-scrub";

export { REDACTED };

export const MASK = "********";

export function maskHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.keys(headers).map((name) => [name, MASK]));
}

/** Names of query parameters and `name=value` pairs that carry credentials: `key`, `api_key`, `access_token`, `code` (function hosts), `sig`, `sid`, ... */
const CREDENTIAL_NAME = /key|token|secret|code|sig|sid|pass|pwd|auth|cred|session|jwt|bearer/i;

/** Shorter fragments are too common to scrub without mangling ordinary text. */
const MIN_SECRET_LENGTH = 6;

/**
 * The strings to scrub for a set of secret values: each value, and for
 * header values like `Bearer abc...` also the credential after the scheme.
 */
export function secretFragments(values: readonly (string | null | undefined)[]): string[] {
  const out = new Set<string>();
  for (const value of values) {
    // Whitespace alone hides nothing, and scrubbed it would take every such run out of the text (indentation, spaces).
    if (!value?.trim()) continue;
    // `name=value` pairs (cookies, `token=...` schemes): a value named or shaped like a credential is one of its own
    // (not a setting such as `lang=english`, which answers may well mention).
    const assigned = value.split(/[;,\s]+/).flatMap((pair) => {
      const at = pair.indexOf("=");
      const [name, v] = [pair.slice(0, at), pair.slice(at + 1).replace(/^"|"$/g, "")];
      return at > 0 && (CREDENTIAL_NAME.test(name) || tokenLike(v)) ? [v] : [];
    });
    const parts = [value, ...value.trim().split(/\s+/).slice(1), ...assigned];
    // The scheme word ("Bearer", "Basic") is not secret; what follows it is. Each also as JSON text carries it
    // (a `"` or `\` escaped; a `/` as `\/`, as PHP's json_encode writes it; beyond ASCII as `\uXXXX`, as Python's
    // json.dumps does), for upstream text the host passes on without parsing it (an error body, say), and
    // percent-encoded, as an upstream quoting the URL it was called at writes it (a bot token in a path).
    for (const part of parts) if (part.length >= MIN_SECRET_LENGTH) for (const form of quotedForms(part)) out.add(form);
  }
  return longestFirst(out);
}

/**
 * For text only the host's own words quote (a run's error quoting its runner): secretFragments, and also each value
 * shorter than MIN_SECRET_LENGTH whole (a PIN), though that may take it out of ordinary words too: an error message
 * mangled beats a secret shown.
 */
export function quotedSecretFragments(values: readonly string[]): string[] {
  const short = values.filter((value) => value.trim() !== "" && value.length < MIN_SECRET_LENGTH).flatMap(quotedForms);
  return longestFirst(new Set([...secretFragments(values), ...short]));
}

/**
 * A value as text may carry it: as it is, as inside a JSON string, percent-encoded. One with half a surrogate pair (a
 * JSON `\ud83d` stored as sent) also as UTF-8 carries it, that half as U+FFFD; encodeURIComponent throws on it as it is.
 */
function quotedForms(value: string): string[] {
  const encodable = value.replace(/\p{Cs}/gu, "\ufffd");
  return [...jsonForms(value), ...(encodable === value ? [] : jsonForms(encodable)), encodeURIComponent(encodable)];
}

/** Each once, longest first (an order kept for those who list them: scrubbing reads them all at once, in any order). */
const longestFirst = (fragments: Iterable<string>): string[] => [...fragments].sort((a, b) => b.length - a.length);

/** A value as it is, and as the inside of a JSON string may carry it (escaped as JSON.stringify does, `/` as `\/`, non-ASCII as `\uXXXX`). */
function jsonForms(value: string): string[] {
  const escaped = JSON.stringify(value).slice(1, -1);
  const ascii = escaped.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  return [value, escaped, escaped.replace(/\//g, "\\/"), ascii, ascii.replace(/\//g, "\\/")];
}

/**
 * `text` with every stretch the fragments cover, as sent, replaced once by `[redacted]` (../lib/scrub.ts): a fragment
 * inside another, or inside the `[redacted]` that replaced one, takes neither apart. `cut`: where `text` was cut short
 * before it was scrubbed (what could be part of a secret there is left out).
 */
export function redact(text: string, fragments: readonly string[], cut?: TextCut): string {
  return scrub(text, matcherOf(fragments), cut);
}

/**
 * Scrubs text that arrives in pieces (a model's streamed deltas): a secret split across pieces is caught too, as the
 * tail of what arrived that could be the start of a secret waits for the next piece before it is sent.
 */
export class StreamRedactor extends StreamScrubber {
  constructor(fragments: readonly string[]) {
    super(matcherOf(fragments));
  }
}

/** One StreamRedactor per stream of pieces (a delta's field, a tool call's arguments), made when its first piece comes. */
export class StreamRedactors<K> {
  private readonly byKey = new Map<K, StreamRedactor>();
  constructor(private readonly fragments: readonly string[]) {}

  push(key: K, piece: string): string {
    let redactor = this.byKey.get(key);
    if (!redactor) this.byKey.set(key, (redactor = new StreamRedactor(this.fragments)));
    return redactor.push(piece);
  }

  /** What each stream still holds back, once nothing more will arrive (streams holding nothing left out). */
  flush(): [K, string][] {
    return [...this.byKey].map(([key, redactor]): [K, string] => [key, redactor.flush()]).filter(([, held]) => held !== "");
  }
}

/**
 * A JSON value (an upstream's answer) with its secrets scrubbed where they
 * are: in string values and keys, matched as the text they are rather than
 * as escaped in serialised JSON (a secret with `"` or `\` in it). A number
 * that contains a secret's digits becomes the string "[redacted]". Anything
 * nested deeper than `maxDepth` is replaced whole.
 */
export function redactValue(value: unknown, fragments: readonly string[], maxDepth = 256): unknown {
  if (!fragments.length) return value;
  const matcher = matcherOf(fragments);
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return scrub(v, matcher);
    if (typeof v === "number") return matcher.occursIn(String(v)) ? REDACTED : v;
    if (v === null || typeof v !== "object") return v;
    // A whole number kept as written (parseKeepingIntegers): a value, not an object to copy.
    const digits = keptIntegerText(v);
    if (digits !== undefined) return matcher.occursIn(digits) ? REDACTED : v;
    if (depth >= maxDepth) return REDACTED;
    if (Array.isArray(v)) return v.map((item) => walk(item, depth + 1));
    // fromEntries defines each key as its own property: assigned, a "__proto__" member would become the copy's prototype and vanish.
    return Object.fromEntries(Object.entries(v).map(([key, item]) => [scrub(key, matcher), walk(item, depth + 1)]));
  };
  return walk(value, 0);
}

const decode = (text: string) => {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
};
/** Query values are form-encoded: `+` is a space. */
const decodeQuery = (text: string) => decode(text.replace(/\+/g, " "));

/**
 * A path segment that looks like a credential rather than a name: long, and
 * either mixed-case with digits (`AbC9...`), a hex/UUID run, or a long
 * random-looking string with several digits. `completions`, `v1` and
 * `gpt-4o-mini-2024-07-18` are names.
 */
function tokenLike(segment: string): boolean {
  if (segment.length < 16 || !/^[A-Za-z0-9._~+=:-]+$/.test(segment)) return false;
  const digits = (segment.match(/[0-9]/g) ?? []).length;
  if (!digits) return false;
  if (/[a-z]/.test(segment) && /[A-Z]/.test(segment)) return true;
  if (/^[0-9a-fA-F-]+$/.test(segment) && segment.replace(/-/g, "").length >= 16 && /[a-fA-F]/.test(segment)) return true;
  return segment.length >= 32 && digits >= 4;
}

interface UrlParts {
  url: URL;
  /** Raw path segments, each with whether it looks like a credential. */
  segments: { raw: string; secret: boolean }[];
  /** Raw query parameters: `name=value` split, or a bare value. */
  params: { name?: string; value: string }[];
}

function urlParts(text: string): UrlParts | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  const segments = url.pathname.split("/").map((raw) => ({ raw, secret: tokenLike(decode(raw)) }));
  const params = url.search
    ? url.search
        .slice(1)
        .split("&")
        .filter(Boolean)
        .map((p) => {
          const at = p.indexOf("=");
          return at < 0 ? { value: p } : { name: p.slice(0, at), value: p.slice(at + 1) };
        })
    : [];
  return { url, segments, params };
}

/**
 * The parts of an endpoint URL that may be credentials: userinfo, query
 * values named or shaped like credentials, token-like path segments, the fragment; raw and decoded, to
 * be scrubbed (with `secretFragments`) wherever the URL's secrets could
 * come back.
 */
export function urlSecrets(text: string): string[] {
  const parts = urlParts(text);
  if (!parts) return [];
  const { url, segments, params } = parts;
  const out = new Set<string>();
  const add = (raw: string, decoded: string) => {
    if (raw) out.add(raw).add(decoded);
  };
  add(url.username, decode(url.username));
  add(url.password, decode(url.password));
  for (const s of segments) if (s.secret) add(s.raw, decode(s.raw));
  // A query value named as a credential, or that looks like one (or a bare one); `api-version=2024-10-21` or
  // `collection=handbook` is not, and scrubbing it would mangle every answer that mentions it.
  for (const p of params) if (p.name === undefined || CREDENTIAL_NAME.test(decodeQuery(p.name)) || tokenLike(decodeQuery(p.value))) add(p.value, decodeQuery(p.value));
  add(url.hash.slice(1), decode(url.hash.slice(1)));
  return [...out];
}

/** An endpoint URL as shown to operators and in messages: its possible credentials masked (see `urlSecrets`). */
export function maskUrl(text: string): string {
  const parts = urlParts(text);
  if (!parts) return MASK;
  const { url, segments, params } = parts;
  if (!url.username && !url.password && !url.hash && !params.length && !segments.some((s) => s.secret)) return text;
  const userinfo = url.username || url.password ? `${MASK}@` : "";
  const path = segments.map((s) => (s.secret ? MASK : s.raw)).join("/");
  const query = params.length ? `?${params.map((p) => (p.name === undefined ? MASK : `${p.name}=${p.value ? MASK : ""}`)).join("&")}` : "";
  return `${url.protocol}//${userinfo}${url.host}${path}${query}${url.hash ? `#${MASK}` : ""}`;
}
