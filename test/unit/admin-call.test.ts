import { afterEach, describe, expect, it } from "vitest";
import { AdminCallError, adminCall } from "../../local/setup";
import { listenLoopback, type LoopbackServer } from "../support/http-server";

const TOKEN = "admin-token-never-shown";
let server: LoopbackServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("adminCall (npm start's set-up and the tests' operator calls)", () => {
  it("gives up on a host that never answers, naming the call and not the token", async () => {
    // Reads the request and never answers: the host's event loop stuck, as seen under CPU starvation.
    server = await listenLoopback(() => undefined);
    const started = performance.now();
    const err = await adminCall({ url: server.url, adminToken: TOKEN }, "GET", "/v1/admin/runners", undefined, { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdminCallError);
    expect((err as Error).message).toBe("admin call GET /v1/admin/runners got no answer within 300 ms");
    expect((err as Error).message).not.toContain(TOKEN);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it("names a refused connection as the call's failure", async () => {
    server = await listenLoopback(() => undefined);
    const url = server.url;
    await server.close();
    server = undefined;
    const err = await adminCall({ url, adminToken: TOKEN }, "POST", "/v1/admin/agents", { agent_id: "a" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdminCallError);
    expect((err as Error).message).toMatch(/^admin call POST \/v1\/admin\/agents failed: fetch failed/);
  });

  it("names the call and its status when the answer is not JSON (workerd's own page for an uncaught exception)", async () => {
    server = await listenLoopback((_req, res) => {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end("Error: boom\n    at Object.fetch (file:///dist/worker.js:1:1)");
    });
    const err = await adminCall({ url: server.url, adminToken: TOKEN }, "PUT", "/v1/admin/agents/echo", {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdminCallError);
    expect((err as Error).message).toBe("admin call PUT /v1/admin/agents/echo answered 500 with a body that is not JSON: Error: boom");
  });

  it("answers the status and parsed body of a host that answers", async () => {
    server = await listenLoopback((req, res) => {
      res.writeHead(201, { "content-type": "application/json" });
      res.end(JSON.stringify({ auth: req.headers.authorization === `Bearer ${TOKEN}` }));
    });
    expect(await adminCall({ url: server.url, adminToken: TOKEN }, "POST", "/x", {})).toEqual({ status: 201, body: { auth: true } });
  });
});
