/**
 * A runner service's base_url may carry a query (README "HTTP API": "a query in it (a function key, `?code=…`) is kept
 * on the manifest and on every run request"), and views mask every query value (README "Credentials at rest": "views
 * mask them"). `PUT /v1/admin/runner-services/{id}` gives a service a new secret, and it takes `base_url` with it: the
 * only base_url an operator can read back is the masked one GET shows. Sent back as shown (as a bot's masked
 * api_base_url is, README "Chat platforms"), it must keep the stored address, not replace its query values with
 * `********`: the function key would be lost (every later call refused), or a setting silently rewritten.
 */
import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { listenLoopback, readBody, sendJson } from "../support/http-server";

const FUNCTION_KEY = "fnkey-Zx81-masked-put-0042";
const OLD_SECRET = "old-runner-secret-0123456789";
const NEW_SECRET = "new-runner-secret-9876543210";

let host: TestHost;
let fn: Awaited<ReturnType<typeof listenLoopback>>;
/** Each run request the function host accepted: its query's tenant, and whether it was signed with the new secret. */
const runs: { tenant: string | null; signedWithNew: boolean }[] = [];

beforeAll(async () => {
  host = await startTestHost();
  // A function host: every path needs its key (`?code=`); `tenant` is a setting it passes on.
  fn = await listenLoopback(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (url.searchParams.get("code") !== FUNCTION_KEY) return sendJson(res, 401, { error: "bad function key" });
    if (url.pathname === "/api/manifest") {
      return sendJson(res, 200, { protocol: "agent-runner/v1", author: "fn", name: "svc", version: "1", runners: [{ name: "default", label: { en_US: "fn" } }] });
    }
    const raw = await readBody(req);
    const runId = JSON.parse(raw).context.run_id;
    const signature = `v1=${createHmac("sha256", NEW_SECRET).update(`${req.headers["x-agent-timestamp"]}.${raw}`).digest("hex")}`;
    runs.push({ tenant: url.searchParams.get("tenant"), signedWithNew: req.headers["x-agent-signature"] === signature });
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.write(`${JSON.stringify({ run_id: runId, type: "message.completed", data: { message: { role: "assistant", content: "ok" } }, sequence: 1 })}\n`);
    res.end(`${JSON.stringify({ run_id: runId, type: "run.completed", data: { finish_reason: "stop" }, sequence: 2 })}\n`);
  });
});
afterAll(async () => {
  await host?.dispose();
  await fn?.close();
});

describe("PUT of a runner service with the base_url GET showed", () => {
  it("keeps the stored address (its function key and settings) and takes the new secret", async () => {
    const baseUrl = `${fn.url}/api/?code=${FUNCTION_KEY}&tenant=acme`;
    const created = await host.admin("POST", "/v1/admin/runner-services", { base_url: baseUrl, secret: OLD_SECRET });
    expect(created.status).toBe(201);
    const serviceId = created.body.service.service_id;
    expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "fn", name: "fn", runner_id: "http:fn/svc/default", event_types: ["message.received"] })).status).toBe(201);

    // The operator rotates the runner's secret, sending the address as the service's view shows it.
    const shown = (await host.admin("GET", `/v1/admin/runner-services/${serviceId}`)).body.base_url;
    expect(shown).not.toContain(FUNCTION_KEY);
    const put = await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: shown, secret: NEW_SECRET });
    expect(put.status).toBe(200);
    const [stored] = await host.query<{ base_url: string }>("SELECT base_url FROM runner_service WHERE service_id = ?", [serviceId]);
    // As registered: in its one spelling (no trailing slash), its key and settings kept.
    expect(stored.base_url).toBe(baseUrl.replace("/api/?", "/api?"));

    // Runs still reach the function with its key and its settings, signed with the new secret.
    const posted = await host.postEvent(messageEvent("fn-conv", "hi"));
    expect((await host.waitForRun(posted.body.run_id!)).status).toBe("completed");
    expect(runs.at(-1)).toEqual({ tenant: "acme", signedWithNew: true });
  });
});
