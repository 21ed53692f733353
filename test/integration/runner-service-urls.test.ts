import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { createHmac } from "node:crypto";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { resultWriter, startAdHocRunner } from "../support/runner";

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

describe("one runner service per address", () => {
  const answering = (name: string) => startAdHocRunner({ name, onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply(`from ${name}`) });
  const services = async () => (await host.admin("GET", "/v1/admin/runner-services")).body.items as { service_id: string; base_url: string }[];

  it("an address spelled another way (trailing slash, letter case) is the same service: registered once, stored as one spelling", async () => {
    const runner = await answering("spelled");
    try {
      const first = await host.admin("POST", "/v1/admin/runner-services", { base_url: `${runner.url}/` });
      expect([first.status, first.body.service?.base_url]).toEqual([201, runner.url]);
      const id = first.body.service.service_id;
      for (const spelling of [runner.url, `${runner.url.replace("http://", "HTTP://")}//`]) {
        const again = await host.admin("POST", "/v1/admin/runner-services", { base_url: spelling });
        expect([spelling, again.status, again.body.service?.service_id, again.body.service?.base_url]).toEqual([spelling, 201, id, runner.url]);
      }
      // Its own address in another spelling is no move.
      const put = await host.admin("PUT", `/v1/admin/runner-services/${id}`, { base_url: `${runner.url}/` });
      expect([put.status, put.body.service?.base_url]).toEqual([200, runner.url]);
      expect((await services()).filter((s) => s.base_url.startsWith(runner.url))).toEqual([expect.objectContaining({ service_id: id })]);
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${id}`)).status).toBe(204);
    } finally {
      await runner.close();
    }
  });

  it("a service stored under another spelling (registered before addresses were normalised) is found by any, keeps its secret, and no other service moves onto it", async () => {
    const runner = await answering("legacy");
    const other = await answering("legacy-other");
    try {
      const secret = "legacy-secret-0123456789";
      const id = (await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).body.service.service_id;
      // As an earlier version stored it: the address as sent, here with a trailing slash (no secret sealed for it yet).
      await host.query("UPDATE runner_service SET base_url = ? WHERE service_id = ?", [`${runner.url}/`, id]);
      expect((await host.admin("POST", `/v1/admin/runner-services/${id}/refresh`)).status).toBe(200);
      const found = await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url, secret });
      expect([found.status, found.body.service?.service_id, found.body.service?.base_url]).toEqual([201, id, runner.url]);
      expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "legacy", name: "legacy", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "legacy-c" } })).status).toBe(201);
      const run = await host.waitForRun((await host.postEvent(messageEvent("legacy-c", "hi"))).body.run_id!);
      expect([run.status, run.message?.content]).toEqual(["completed", "from legacy"]);
      const call = runner.calls.at(-1)!;
      expect(call.headers["x-agent-signature"]).toBe(`v1=${createHmac("sha256", secret).update(`${call.headers["x-agent-timestamp"]}.${call.raw}`).digest("hex")}`);

      // Another service moved onto this address in another spelling would make two services of one.
      const otherId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: other.url })).body.service.service_id;
      const onto = await host.admin("PUT", `/v1/admin/runner-services/${otherId}`, { base_url: `${runner.url}/` });
      expect([onto.status, onto.body.error?.code, onto.body.error?.details]).toEqual([409, "conflict", { service_id: id }]);
      expect((await host.admin("GET", `/v1/admin/runner-services/${otherId}`)).body.base_url).toBe(other.url);
      expect((await host.admin("DELETE", "/v1/admin/agents/legacy")).status).toBe(200);
      for (const s of [id, otherId]) expect((await host.admin("DELETE", `/v1/admin/runner-services/${s}`)).status).toBe(204);
    } finally {
      await Promise.all([runner.close(), other.close()]);
    }
  });

  it("a manifest listing no runner (or none valid) is refused with 502 and registers nothing; a refresh to one changes nothing and shows why", async () => {
    let runners: unknown[] = [];
    const service = await listenLoopback((req, res) => sendJson(res, 200, { ...manifest("empty"), runners }));
    try {
      const empty = await host.admin("POST", "/v1/admin/runner-services", { base_url: service.url });
      expect([empty.status, empty.body.error?.code]).toEqual([502, "bad_gateway"]);
      expect(empty.body.error.message).toMatch(/lists no runner/);
      runners = [{ name: "Not A Name", label: { en_US: "bad" } }];
      const invalid = await host.admin("POST", "/v1/admin/runner-services", { base_url: service.url });
      expect([invalid.status, invalid.body.error?.code, invalid.body.error?.details?.skipped?.[0]?.name]).toEqual([502, "bad_gateway", "Not A Name"]);
      expect((await services()).map((s) => s.base_url)).not.toContain(service.url);

      runners = [{ name: "default", label: { en_US: "ok" } }];
      const registered = await host.admin("POST", "/v1/admin/runner-services", { base_url: service.url });
      expect(registered.status).toBe(201);
      const id = registered.body.service.service_id;
      runners = [];
      const refresh = await host.admin("POST", `/v1/admin/runner-services/${id}/refresh`);
      expect([refresh.status, refresh.body.error?.code]).toEqual([502, "bad_gateway"]);
      expect((await host.admin("GET", `/v1/admin/runner-services/${id}`)).body).toMatchObject({ runners: ["http:urls/empty/default"], last_error: expect.stringMatching(/lists no runner/) });
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${id}`)).status).toBe(204);
    } finally {
      await service.close();
    }
  });

  it("a manifest's problems quoted back (the 502, details.skipped, last_error) show no part of the service's secret or its URL's key", async () => {
    // Copies of the secret side by side as one runner's name: cut to the message's 1000 characters before it was
    // scrubbed, one of them showed its start.
    const SECRET = "svcsecret-AbCdEf0123456789AbCdEf";
    const URL_KEY = "UrlKey-AbCd0123456789xyz";
    const noPartOf = (secret: string, text: string) => expect(text).not.toContain(secret.slice(0, secret.indexOf("-") + 1));
    const invalid = [{ name: URL_KEY, label: { en_US: "named by the key" } }, { name: SECRET.repeat(60), label: { en_US: "named by the secret" } }];
    let runners: unknown[] = invalid;
    const service = await listenLoopback((_req, res) => sendJson(res, 200, { ...manifest("quoted"), runners }));
    const baseUrl = `${service.url}/?code=${URL_KEY}`;
    try {
      const refused = await host.admin("POST", "/v1/admin/runner-services", { base_url: baseUrl, secret: SECRET });
      expect([refused.status, refused.body.error?.code]).toEqual([502, "bad_gateway"]);
      expect(refused.body.error.details.skipped.map((s: { name: string }) => s.name)).toEqual(["[redacted]", "[redacted]"]);
      for (const secret of [SECRET, URL_KEY]) noPartOf(secret, JSON.stringify(refused.body));

      // Registered with its secret, then refreshed to the same manifest: the secret as stored is looked for too.
      runners = [{ name: "default", label: { en_US: "ok" } }];
      const registered = await host.admin("POST", "/v1/admin/runner-services", { base_url: baseUrl, secret: SECRET });
      expect(registered.status).toBe(201);
      const id = registered.body.service.service_id;
      runners = invalid;
      const refresh = await host.admin("POST", `/v1/admin/runner-services/${id}/refresh`);
      expect([refresh.status, refresh.body.error?.code]).toEqual([502, "bad_gateway"]);
      const view = await host.admin("GET", `/v1/admin/runner-services/${id}`);
      // Scrubbed before it is cut: the copies are one [redacted], and the message is whole.
      expect(view.body.last_error).toMatch(/lists no runner the host can register \(invalid: \[redacted\]: name: [^;]*; \[redacted\]: name: [^;]*; name: [^;]*\)$/);
      for (const secret of [SECRET, URL_KEY]) for (const text of [JSON.stringify(refresh.body), JSON.stringify(view.body)]) noPartOf(secret, text);

      // A manifest registered with some runners skipped says why, as quoted.
      runners = [{ name: "default", label: { en_US: "ok" } }, ...invalid];
      const partly = await host.admin("POST", `/v1/admin/runner-services/${id}/refresh`);
      expect([partly.status, partly.body.skipped?.map((s: { name: string }) => s.name)]).toEqual([200, ["[redacted]", "[redacted]"]]);
      for (const secret of [SECRET, URL_KEY]) noPartOf(secret, JSON.stringify(partly.body));
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${id}`)).status).toBe(204);
    } finally {
      await service.close();
    }
  });

  it("a refresh takes no body: one with fields is a 400, not ignored; none, or {}, refreshes", async () => {
    const runner = await answering("refresh-body");
    try {
      const id = (await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).body.service.service_id;
      const refresh = (body?: string) => fetch(`${host.url}/v1/admin/runner-services/${id}/refresh`, { method: "POST", headers: { authorization: `Bearer ${host.adminToken}` }, body });
      const withFields = await refresh(JSON.stringify({ base_url: "http://elsewhere.example" }));
      expect([withFields.status, ((await withFields.json()) as any).error?.code]).toEqual([400, "invalid_request"]);
      const notJson = await refresh("force");
      expect([notJson.status, ((await notJson.json()) as any).error?.code]).toEqual([400, "invalid_json"]);
      for (const body of [undefined, "", "{}"]) expect([body, (await refresh(body)).status]).toEqual([body, 200]);
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${id}`)).status).toBe(204);
    } finally {
      await runner.close();
    }
  });

  it("no other body-less POST ignores a body: an MCP server's refresh, the secrets reseal, a run's cancel and a bot's webhook registration refuse one with fields", async () => {
    const post = (path: string, body?: string) => fetch(`${host.url}${path}`, { method: "POST", headers: { authorization: `Bearer ${host.adminToken}` }, body });
    // Without a body each answers as it always did: no such server or run, a reseal with nothing to do.
    const routes: [string, number][] = [
      ["/v1/admin/mcp-servers/no-such-server/refresh", 404],
      ["/v1/admin/secrets/reseal", 200],
      ["/v1/runs/run_00000000000000000000000000/cancel", 404],
      ["/v1/admin/bots/no-such-bot/webhook", 404],
    ];
    for (const [path, usual] of routes) {
      const withFields = await post(path, JSON.stringify({ force: true }));
      expect([path, withFields.status, ((await withFields.json()) as any).error?.code]).toEqual([path, 400, "invalid_request"]);
      const notJson = await post(path, "now");
      expect([path, notJson.status, ((await notJson.json()) as any).error?.code]).toEqual([path, 400, "invalid_json"]);
      for (const body of [undefined, "{}"]) expect([path, body, (await post(path, body)).status]).toEqual([path, body, usual]);
    }
  });
});
