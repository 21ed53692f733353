import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { listenLoopback, sendJson, type LoopbackServer } from "../support/http-server";

/**
 * A refresh re-fetches the manifest from the address the service had when the refresh began. A PUT that moves
 * the service while that fetch is under way must not be undone by the refresh saving the old address back.
 */
let host: TestHost;
beforeAll(async () => { host = await startTestHost(); });
afterAll(async () => { await host?.dispose(); });

const manifest = { protocol: "agent-runner/v1", author: "tests", name: "moving", version: "1", runners: [{ name: "default", label: { en_US: "d" } }] };

describe("a refresh racing a move of the service (PUT)", () => {
  it("does not move the service back to its old address", async () => {
    let hold: (() => void) | undefined;
    let held: (() => void) | undefined;
    const heldRequest = new Promise<void>((r) => (held = r));
    const oldSvc: LoopbackServer = await listenLoopback(async (_req, res) => {
      if (hold === undefined && held) {
        // The refresh's fetch: answered only once the move is done.
        const release = new Promise<void>((r) => (hold = r));
        const signal = held; held = undefined; signal();
        await release;
      }
      sendJson(res, 200, manifest);
    });
    const newSvc = await listenLoopback((_req, res) => sendJson(res, 200, manifest));
    try {
      // Registered (this first fetch is not held: `held` is unset meanwhile).
      const registerSignal = held; held = undefined;
      const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: oldSvc.url, secret: "a-shared-secret-0123456789" });
      expect(reg.status).toBe(201);
      held = registerSignal;
      const serviceId = reg.body.service.service_id;

      const refresh = host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`);
      await heldRequest;
      const moved = await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: newSvc.url });
      expect([moved.status, moved.body.service.base_url]).toEqual([200, newSvc.url]);
      hold!();
      const refreshed = await refresh;
      // Either refused (409) or applied at the new address: never the move undone.
      const now = await host.admin("GET", `/v1/admin/runner-services/${serviceId}`);
      expect({ refresh: refreshed.status === 409 || refreshed.status === 200, base_url: now.body.base_url }).toEqual({ refresh: true, base_url: newSvc.url });
    } finally {
      await oldSvc.close();
      await newSvc.close();
    }
  });
});
