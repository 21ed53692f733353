/** Operator calls the launcher makes: the same admin API anyone would use. */

/** Far above what an admin call takes with the database away for its whole query timeout (15 s), twice over. */
export const ADMIN_CALL_TIMEOUT_MS = 60_000;

/** An admin call that got no answer (in time, or at all): names the call, never the token. */
export class AdminCallError extends Error {
  override readonly name = "AdminCallError";
  constructor(
    readonly call: string,
    why: string,
    options?: ErrorOptions,
  ) {
    super(`admin call ${call} ${why}`, options);
  }
}

export async function adminCall<T = unknown>(
  host: { url: string; adminToken: string },
  method: string,
  path: string,
  body?: unknown,
  { timeoutMs = ADMIN_CALL_TIMEOUT_MS }: { timeoutMs?: number } = {},
): Promise<{ status: number; body: T }> {
  let text: string;
  let status: number;
  try {
    // undici's own bound is 300 s: a host that stopped answering would hold npm start's set-up (or a test) that long.
    const res = await fetch(`${host.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${host.adminToken}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = res.status;
    text = await res.text();
  } catch (err) {
    const timedOut = (err as Error).name === "TimeoutError";
    throw new AdminCallError(`${method} ${path}`, timedOut ? `got no answer within ${timeoutMs} ms` : `failed: ${(err as Error).message}`, { cause: err });
  }
  try {
    return { status, body: (text ? JSON.parse(text) : null) as T };
  } catch (err) {
    // A bare SyntaxError would name neither the call nor the status; the first line says what answered (never the token).
    const firstLine = text.split("\n", 1)[0]!.slice(0, 200).replaceAll(host.adminToken, "[token]");
    throw new AdminCallError(`${method} ${path}`, `answered ${status} with a body that is not JSON: ${firstLine}`, { cause: err });
  }
}

/** The registered runner of this id, if any: every page of the listing looked through. */
async function registeredRunner(host: { url: string; adminToken: string }, runnerId: string) {
  type Page = { items: { runner_id: string; service_id: string }[]; next_cursor?: string };
  for (let cursor: string | undefined = ""; cursor !== undefined; ) {
    const page: Page = (await adminCall<Page>(host, "GET", `/v1/admin/runners?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)).body;
    const found = page.items.find((r) => r.runner_id === runnerId);
    if (found) return found;
    cursor = page.next_cursor;
  }
  return undefined;
}

/**
 * Register a runner service and bind one agent to it (idempotent: an existing agent is replaced). With
 * `keepExisting` (npm start after its first start) the example is the operator's: the agent is left as it is (disabled,
 * re-scoped or deleted), and the service only follows the runner to its address if it is still registered. Answers
 * whether the agent was bound now.
 */
export async function bindRunner(
  host: { url: string; adminToken: string },
  opts: { baseUrl: string; secret?: string; runnerId: string; agentId: string; scope?: { type: string; id?: string }; eventTypes?: string[]; keepExisting?: boolean },
): Promise<boolean> {
  const owner = await registeredRunner(host, opts.runnerId);
  // The operator deleted the example's service: it stays deleted.
  if (opts.keepExisting && !owner) return false;
  let reg = await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: opts.baseUrl, secret: opts.secret });
  if (reg.status === 409) {
    // Its runners are registered at another address (the service moved, e.g. RUNNER_PORT changed): move that service here.
    if (owner) reg = await adminCall(host, "PUT", `/v1/admin/runner-services/${owner.service_id}`, { base_url: opts.baseUrl, secret: opts.secret });
  }
  if (reg.status !== 201 && reg.status !== 200) throw new Error(`registering ${opts.baseUrl} failed: ${JSON.stringify(reg.body)}`);
  const agent = {
    agent_id: opts.agentId,
    name: opts.agentId,
    runner_id: opts.runnerId,
    event_types: opts.eventTypes ?? ["message.received"],
    scope: opts.scope ?? { type: "global" },
  };
  // `npm start` again: the agent as the operator left it (disabled, re-scoped, reconfigured, or deleted) stays so.
  if (opts.keepExisting) return false;
  const existing = await adminCall(host, "GET", `/v1/admin/agents/${opts.agentId}`);
  const res = existing.status === 200
    ? await adminCall(host, "PUT", `/v1/admin/agents/${opts.agentId}`, agent)
    : await adminCall(host, "POST", "/v1/admin/agents", agent);
  if (res.status >= 300) throw new Error(`binding agent ${opts.agentId} failed: ${JSON.stringify(res.body)}`);
  return true;
}
