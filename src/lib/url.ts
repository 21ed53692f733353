/**
 * `path` appended to the base URL's path; its query (an `api-version`, a function key's `?code=`) is kept where it
 * belongs instead of receiving the path.
 */
export function joinUrl(base: string, path: string): string {
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${path}`;
  return url.toString();
}
