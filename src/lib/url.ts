/**
 * `path` appended to the base URL's path; its query (an `api-version`, a function key's `?code=`) is kept where it
 * belongs instead of receiving the path.
 */
export function joinUrl(base: string, path: string): string {
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${path}`;
  return url.toString();
}

/**
 * One spelling per address, so one service is never registered twice under two: scheme and host lower-cased (an
 * IDN host in its ASCII form), a default port left out, trailing slashes of the path (joinUrl drops them anyway) and a
 * fragment (never sent) dropped. The path's letter case and the query are the service's own and stay as given.
 */
export function normalizeBaseUrl(base: string): string {
  const url = new URL(base);
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}${url.search}`;
}

/** Whether two base URLs name the same address, however each is spelled (a row stored before normalisation). */
export const sameBaseUrl = (a: string, b: string): boolean => {
  try {
    return normalizeBaseUrl(a) === normalizeBaseUrl(b);
  } catch {
    return a === b;
  }
};

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * An id a payload gave (a message's, an interaction's) as one URL path segment. Half a surrogate pair, on which
 * encodeURIComponent throws, goes as U+FFFD: the platform then answers for an id it does not know, as for any other.
 */
export const pathSegment = (id: string): string => encodeURIComponent(id.replace(LONE_SURROGATE, "\ufffd"));
