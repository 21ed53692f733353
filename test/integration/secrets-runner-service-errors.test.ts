/**
 * A runner service's base_url may carry a credential in its query (a function key, `?code=…`: README "HTTP API").
 * README "Credentials at rest": credentials inside endpoint URLs are stored as given and "views mask them";
 * src/registry/register.ts masks the URL its messages name. The runtime's own fetch error, quoted after it,
 * must not name the URL unmasked: a manifest address that redirects in a loop made workerd's fetch throw
 * "Too many redirects." followed by every URL it visited, query included (redirects are no longer followed:
 * the answer names the 302, and still not the key).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { listenLoopback, sendJson } from "../support/http-server";

const KEY = "FUNCKEY-loop-secret-0123456789";
let host: TestHost;
let svc: Awaited<ReturnType<typeof listenLoopback>>;
let looping = false;

beforeAll(async () => {
  host = await startTestHost({ captureLogs: true });
  svc = await listenLoopback((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    // A gateway bouncing the request back to itself (a misconfigured http/https or trailing-slash rule).
    if (looping || url.pathname.startsWith("/loop/")) return void res.writeHead(302, { location: req.url }).end();
    if (url.pathname === "/fn/manifest") return sendJson(res, 200, { protocol: "agent-runner/v1", author: "keyed", name: "svc", version: "1", runners: [{ name: "default", label: { en_US: "k" } }] });
    res.writeHead(404).end();
  });
});
afterAll(async () => {
  await host?.dispose();
  await svc?.close();
});

describe("a runner service's function key in fetch errors", () => {
  it("is not quoted by a registration's 502", async () => {
    const res = await host.admin("POST", "/v1/admin/runner-services", { base_url: `${svc.url}/loop/?code=${KEY}` });
    expect([res.status, res.body.error?.code]).toEqual([502, "bad_gateway"]);
    expect(JSON.stringify(res.body)).not.toContain(KEY);
  });

  it("is not quoted by a refresh's 502, nor kept in the service's last_error", async () => {
    const created = await host.admin("POST", "/v1/admin/runner-services", { base_url: `${svc.url}/fn/?code=${KEY}` });
    expect(created.status).toBe(201);
    const id = created.body.service.service_id;
    looping = true;
    const refreshed = await host.admin("POST", `/v1/admin/runner-services/${id}/refresh`);
    looping = false;
    expect([refreshed.status, refreshed.body.error?.code]).toEqual([502, "bad_gateway"]);
    expect(JSON.stringify(refreshed.body)).not.toContain(KEY);
    const view = await host.admin("GET", `/v1/admin/runner-services/${id}`);
    expect(view.body.last_error).toMatch(/redirect/i);
    expect(JSON.stringify(view.body)).not.toContain(KEY);
    await new Promise((r) => setTimeout(r, 200));
    expect(host.logs()).not.toContain(KEY);
  });
});
