import type { Context, NotFoundHandler } from "hono";
import type { RouterRoute } from "hono/types";
import { drainBody } from "../lib/drain";
import { HostError } from "../lib/errors";

/** A route's path as a pattern of the request paths it takes (`:param` one segment, `*` the rest). */
function patternOf(path: string): RegExp {
  const source = path
    .split("/")
    .map((part) => (part === "*" ? ".*" : part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`^${source}$`);
}

/** Each path's methods, in the order registered; middleware (and `.all` fallbacks) take every method, so they name none. */
function methodsByPattern(routes: RouterRoute[]): { pattern: RegExp; methods: string[] }[] {
  const byPath = new Map<string, string[]>();
  for (const { path, method } of routes) {
    if (method === "ALL") continue;
    const methods = byPath.get(path) ?? [];
    if (!methods.includes(method)) methods.push(method);
    byPath.set(path, methods);
  }
  return [...byPath].map(([path, methods]) => ({ pattern: patternOf(path), methods }));
}

/** The methods a path is routed for; HEAD wherever GET is, as Hono answers HEAD with the GET route. */
function allowedMethods(table: { pattern: RegExp; methods: string[] }[], path: string): string[] {
  const allowed = new Set<string>();
  for (const { pattern, methods } of table) if (pattern.test(path)) for (const m of methods) allowed.add(m === "GET" ? "GET, HEAD" : m);
  return [...allowed];
}

/**
 * No route answered. A path routed for other methods is a 405 naming them in `Allow` (a client scripting the admin
 * API learns it used the wrong verb, not that the resource is missing); anything else a 404. Middleware runs first,
 * so an anonymous caller of an admin path still gets its 401.
 */
export function notFoundOrNotAllowed(routes: () => RouterRoute[]): NotFoundHandler {
  let table: ReturnType<typeof methodsByPattern> | undefined;
  return async (c: Context) => {
    const path = c.req.path;
    table ??= methodsByPattern(routes());
    const allowed = allowedMethods(table, path);
    if (!allowed.length) return c.json({ error: { code: "not_found", message: `no route for ${c.req.method} ${path}` } }, 404);
    // Refused unread, as every refusal is: drained so the client reads the 405 instead of a reset.
    await drainBody(c.req.raw);
    const allow = allowed.join(", ");
    c.header("allow", allow);
    return c.json(new HostError(405, "method_not_allowed", `${path} takes ${allow}, not ${c.req.method}`, { allow }).toBody(), 405);
  };
}
