import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { listenLoopback, readBody, sendJson } from "../support/http-server";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

const manifest = (name: string) => ({ protocol: "agent-runner/v1", author: "urls", name, version: "1", runners: [{ name: "default", label: { en_US: name } }] });

describe("runner service addresses", () => {
  it("a manifest whose body stalls after its headers is a 502 bad_gateway within the fetch timeout, not a 500", async () => {
    const stalling = await listenLoopback((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(JSON.stringify(manifest("stall")).slice(0, 20)); // and nothing more, ever
    });
    try {
      const started = Date.now();
      const res = await host.admin("POST", "/v1/admin/runner-services", { base_url: stalling.url });
      expect([res.status, res.body.error?.code]).toEqual([502, "bad_gateway"]);
      expect(res.body.error.message).toMatch(/could not read .*\/manifest/);
      expect(Date.now() - started).toBeLessThan(15_000);
      expect((await host.admin("GET", "/v1/admin/runner-services")).body.items).toEqual([]);
    } finally {
      await stalling.close();
    }
  }, 20_000);

  it("a base_url with a query (a function key) keeps it: the manifest and every run request are sent to path?query", async () => {
    const seen: string[] = [];
    const gated = await listenLoopback(async (req, res) => {
      seen.push(`${req.method} ${req.url}`);
      const url = new URL(req.url ?? "/", "http://x");
      if (url.searchParams.get("code") !== "gatekey-123") return void res.writeHead(401).end();
      if (url.pathname === "/fn/manifest") return sendJson(res, 200, manifest("gated"));
      if (url.pathname !== "/fn/runners/default/run") return void res.writeHead(404).end();
      const runId = JSON.parse(await readBody(req)).context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(`${JSON.stringify({ run_id: runId, type: "message.completed", sequence: 1, data: { message: { role: "assistant", content: "through the gate" } } })}\n`);
      res.end(`${JSON.stringify({ run_id: runId, type: "run.completed", sequence: 2, data: { finish_reason: "stop" } })}\n`);
    });
    try {
      await host.bind({ baseUrl: `${gated.url}/fn/?code=gatekey-123`, runnerId: "http:urls/gated/default", agentId: "gated" });
      const { body } = await host.postEvent(messageEvent("gated-c", "hi"));
      const run = await host.waitForRun(body.run_id!);
      expect([run.status, run.message?.content]).toEqual(["completed", "through the gate"]);
      expect(seen).toEqual(["GET /fn/manifest?code=gatekey-123", "POST /fn/runners/default/run?code=gatekey-123"]);
    } finally {
      await gated.close();
    }
  });
});
