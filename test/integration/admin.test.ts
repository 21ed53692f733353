import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { listenLoopback } from "../support/http-server";
import { resultWriter, startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

const perms = { history: ["page"] };
beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "multi",
    runners: [
      { name: "alpha", label: { en_US: "Alpha" }, permissions: perms, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" }, required: true }] },
      { name: "beta", label: { en_US: "Beta" }, permissions: perms },
      { name: "broken", label: { en_US: "Broken" }, capabilities: { telepathy: true } },
    ],
    // Each runner answers with its own name and the agent that bound it (and the api_key it was given, if any).
    onRun({ body }, res) {
      const key = body.context.config.api_key ? ` with ${body.context.config.api_key}` : "";
      resultWriter(res, body.context.run_id).reply(`${body.runner_name} for ${body.context.metadata.agent_id}${key}`);
    },
  });
  host = await startTestHost();
  const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url, secret: "a-shared-secret-0123456789" });
  expect(reg.status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const agent = (id: string, runnerName: string, scope: Record<string, string>, extra: Record<string, unknown> = {}) => ({
  agent_id: id,
  name: id,
  runner_id: runner.runnerId(runnerName),
  event_types: ["message.received"],
  scope,
  ...extra,
});

describe("admin API: runner services, runners, agents and binding resolution", () => {
  it("registers the valid runners of a manifest and reports the invalid one", async () => {
    const res = await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
    expect(res.status).toBe(201);
    expect(res.body.registered.sort()).toEqual([runner.runnerId("alpha"), runner.runnerId("beta")]);
    expect(res.body.skipped).toHaveLength(1);
    expect(res.body.skipped[0]).toMatchObject({ name: "broken" });
    expect(res.body.skipped[0].reason).toMatch(/telepathy/);
    // The secret is kept (re-registration without one keeps it) and never returned.
    expect(res.body.service.has_secret).toBe(true);
    expect(JSON.stringify(res.body)).not.toContain("a-shared-secret");

    const list = await host.admin("GET", "/v1/admin/runners");
    expect(list.body.items.map((r: any) => r.runner_id)).toEqual(expect.arrayContaining([runner.runnerId("alpha"), runner.runnerId("beta")]));
    const refreshed = await host.admin("POST", `/v1/admin/runner-services/${res.body.service.service_id}/refresh`);
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.service.service_id).toBe(res.body.service.service_id);
  });

  it("shows why the last refresh failed as last_error, until a refresh succeeds", async () => {
    let answer: "manifest" | "down" | "garbage" = "manifest";
    const manifest = { protocol: "agent-runner/v1", author: "tests", name: "flaky", version: "1", runners: [{ name: "default", label: { en_US: "flaky" } }] };
    const flaky = await listenLoopback((_req, res) => {
      if (answer === "down") res.writeHead(503).end("maintenance");
      else res.writeHead(200, { "content-type": "application/json" }).end(answer === "garbage" ? '{"protocol":"v0"}' : JSON.stringify(manifest));
    });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: flaky.url })).body.service.service_id;
      const lastError = async () => (await host.admin("GET", `/v1/admin/runner-services/${serviceId}`)).body.last_error;
      expect(await lastError()).toBeUndefined();
      answer = "down";
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(502);
      expect(await lastError()).toMatch(/HTTP 503/);
      // Not a manifest is the service's fault, as an unreadable one is: 502, never the 400 of a bad request.
      answer = "garbage";
      const notManifest = await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`);
      expect([notManifest.status, notManifest.body.error.code, notManifest.body.error.message]).toEqual([502, "bad_gateway", expect.stringContaining(`${flaky.url}/manifest is not an agent-runner/v1 manifest`)]);
      expect(await lastError()).toMatch(/not an agent-runner\/v1 manifest/);
      answer = "manifest";
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
      expect(await lastError()).toBeUndefined();
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${serviceId}`)).status).toBe(204);
    } finally {
      await flaky.close();
    }
  });

  it("refuses a refresh whose manifest drops a runner an agent runs on (409 naming both), and applies it once no agent does", async () => {
    const runners: Record<string, unknown>[] = [{ name: "keep", label: { en_US: "keep" } }, { name: "gone", label: { en_US: "gone" } }];
    const mutable = await startAdHocRunner({ name: "mutable", runners, onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("ok") });
    try {
      const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: mutable.url });
      const serviceId = reg.body.service.service_id;
      const onGone = { agent_id: "on-gone", name: "g", runner_id: mutable.runnerId("gone"), event_types: ["message.received"], scope: { type: "conversation", id: "on-gone" } };
      expect((await host.admin("POST", "/v1/admin/agents", onGone)).status).toBe(201);
      runners.splice(1);
      const refused = await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`);
      expect(refused).toMatchObject({ status: 409, body: { error: { code: "conflict", details: { agents: ["on-gone"], runner_ids: [mutable.runnerId("gone")] } } } });
      // Nothing changed: the agent still runs.
      expect((await host.postEvent(messageEvent("on-gone", "still here"))).body.disposition).toBe("started");
      expect((await host.admin("DELETE", "/v1/admin/agents/on-gone")).status).toBe(200);
      const applied = await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`);
      expect(applied.status).toBe(200);
      expect(applied.body.registered).toEqual([mutable.runnerId("keep")]);
    } finally {
      await mutable.close();
    }
  });

  it("refuses a refresh that makes a config field required which a bound agent lacks (409 naming agent and field), and applies it once the agent has it", async () => {
    const schema: Record<string, unknown>[] = [{ name: "region", type: "string", label: { en_US: "Region" }, required: false }];
    const runners = [{ name: "default", label: { en_US: "cfg" }, config_schema: schema }];
    const cfg = await startAdHocRunner({ name: "cfg", runners, onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("ok") });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: cfg.url })).body.service.service_id;
      const bare = { agent_id: "cfg-bare", name: "bare", runner_id: cfg.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "cfg-bare" } };
      const given = { ...bare, agent_id: "cfg-given", scope: { type: "conversation", id: "cfg-given" }, runner_config: { region: "eu" } };
      expect((await host.admin("POST", "/v1/admin/agents", bare)).status).toBe(201);
      expect((await host.admin("POST", "/v1/admin/agents", given)).status).toBe(201);

      // Required with a default needs nothing of the agents.
      schema[0] = { ...schema[0], required: true, default: "us" };
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);

      schema[0] = { ...schema[0], required: true, default: undefined };
      const refused = await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`);
      expect(refused).toMatchObject({ status: 409, body: { error: { code: "conflict", details: { agents: [{ agent_id: "cfg-bare", runner_id: cfg.runnerId(), missing: ["region"] }] } } } });
      expect(refused.body.error.message).toMatch(/cfg-bare: region/);
      // Nothing changed: the stored manifest still has the default, and the agent still runs.
      const stored = (await host.admin("GET", "/v1/admin/runners")).body.items.find((r: any) => r.runner_id === cfg.runnerId());
      expect(JSON.stringify(stored)).toContain('"default":"us"');
      expect((await host.postEvent(messageEvent("cfg-bare", "still here"))).body.disposition).toBe("started");

      expect((await host.admin("PUT", "/v1/admin/agents/cfg-bare", { ...bare, runner_config: { region: "ap" } })).status).toBe(200);
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
    } finally {
      await cfg.close();
    }
  });

  it("moves a service to a new address (PUT), keeping its runners, agents and secret; npm start's binding does so itself", async () => {
    const reply = (where: string) => async ({ body }: { body: any }, res: import("node:http").ServerResponse) => resultWriter(res, body.context.run_id).reply(`from ${where}`);
    const first = await startAdHocRunner({ name: "moving", onRun: reply("first") });
    const second = await startAdHocRunner({ name: "moving", onRun: reply("second") });
    const third = await startAdHocRunner({ name: "moving", onRun: reply("third") });
    try {
      const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: first.url, secret: "moving-secret-0123456789" });
      expect((await host.admin("POST", "/v1/admin/agents", agent("moving", "default", { type: "conversation", id: "moving" }, { runner_id: first.runnerId() }))).status).toBe(201);
      const answer = async () => (await host.waitForRun((await host.postEvent(messageEvent("moving", "hi"))).body.run_id!)).message?.content;
      expect(await answer()).toBe("from first");
      // A run still waiting (debounced) when the service moves goes to where it is now.
      const later = agent("moving-later", "default", { type: "conversation", id: "moving-later" }, { runner_id: first.runnerId(), concurrency: { debounce_ms: 1500 } });
      expect((await host.admin("POST", "/v1/admin/agents", later)).status).toBe(201);
      const waiting = await host.postEvent(messageEvent("moving-later", "hi"));
      // The same runner ids at another address are another service's: refused, until the service itself moves.
      const clash = await host.admin("POST", "/v1/admin/runner-services", { base_url: second.url });
      expect(clash.status).toBe(409);
      expect(clash.body.error).toMatchObject({ message: expect.stringContaining(`PUT /v1/admin/runner-services/${reg.body.service.service_id}`), details: { service_id: reg.body.service.service_id } });
      const moved = await host.admin("PUT", `/v1/admin/runner-services/${reg.body.service.service_id}`, { base_url: second.url });
      expect(moved.status).toBe(200);
      expect(moved.body.service).toMatchObject({ service_id: reg.body.service.service_id, base_url: second.url, has_secret: true });
      expect(await answer()).toBe("from second");
      expect(second.calls.at(-1)!.headers["x-agent-signature"]).toMatch(/^v1=/);
      expect((await host.waitForRun(waiting.body.run_id!)).message?.content).toBe("from second");
      // npm start after RUNNER_PORT changed: its binding finds the service by its runner and moves it.
      await host.bind({ baseUrl: third.url, runnerId: third.runnerId(), agentId: "moving-started", scope: { type: "conversation", id: "moving-started" } });
      expect((await host.admin("GET", "/v1/admin/runners")).body.items.find((r: any) => r.runner_id === third.runnerId()).service_id).toBe(reg.body.service.service_id);
      expect(await answer()).toBe("from third");
      expect((await host.admin("PUT", "/v1/admin/runner-services/svc_missing", { base_url: third.url })).status).toBe(404);

      // Listed and shown; deleted only once no agent runs on it, and its past runs stay readable.
      const id = reg.body.service.service_id;
      expect((await host.admin("GET", "/v1/admin/runner-services")).body.items.map((s: any) => s.service_id)).toContain(id);
      expect((await host.admin("GET", `/v1/admin/runner-services/${id}`)).body).toMatchObject({ service_id: id, base_url: third.url, runners: [third.runnerId()] });
      const inUse = await host.admin("DELETE", `/v1/admin/runner-services/${id}`);
      expect(inUse).toMatchObject({ status: 409, body: { error: { details: { agents: ["moving", "moving-later", "moving-started"] } } } });
      for (const a of ["moving", "moving-later", "moving-started"]) expect((await host.admin("DELETE", `/v1/admin/agents/${a}`)).status).toBe(200);
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${id}`)).status).toBe(204);
      expect((await host.admin("GET", `/v1/admin/runner-services/${id}`)).status).toBe(404);
      expect((await host.admin("GET", "/v1/admin/runners")).body.items.map((r: any) => r.runner_id)).not.toContain(third.runnerId());
      expect((await host.admin("GET", `/v1/runs/${waiting.body.run_id}`)).body.status).toBe("completed");
    } finally {
      await Promise.all([first.close(), second.close(), third.close()]);
    }
  });

  it("refreshes and moves a runner service reading only its agents' runners and configs, never every agent whole", async () => {
    const runners = [{ name: "default", label: { en_US: "scaled" }, permissions: perms, config_schema: [{ name: "token", type: "secret", label: { en_US: "Token" } }] }];
    const reply = ({ body }: { body: any }, res: import("node:http").ServerResponse) => resultWriter(res, body.context.run_id).reply(`token ${body.context.config.token}`);
    const first = await startAdHocRunner({ name: "scaled", runners, onRun: reply });
    const second = await startAdHocRunner({ name: "scaled", runners, onRun: reply });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: first.url })).body.service.service_id;
      const scaled = agent("scaled", "default", { type: "conversation", id: "scaled" }, { runner_id: first.runnerId(), runner_config: { token: "tok-0123" } });
      expect((await host.admin("POST", "/v1/admin/agents", scaled)).status).toBe(201);
      // A read of agents whole names every column: the drill fails the first statement that does (an operator may have thousands of agents).
      host.databaseOutage({ queries: 1, matching: "delivery_policy_json" });
      try {
        expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
        expect((await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: second.url })).status).toBe(200);
      } finally {
        host.databaseOutage({ queries: 0 });
      }
      // Its agent's sealed token moved with it.
      expect((await host.waitForRun((await host.postEvent(messageEvent("scaled", "hi"))).body.run_id!)).message?.content).toBe("token tok-0123");
      expect(second.calls).toHaveLength(1);
      expect((await host.admin("DELETE", "/v1/admin/agents/scaled")).status).toBe(200);
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });

  it("drops a runner service's secret given as null, so its runs go unsigned; left out (or sent back as GET showed it), the secret is kept", async () => {
    const signed = await startAdHocRunner({ name: "unsigning", onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("ok") });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: signed.url, secret: "unsigning-secret-0123456789" })).body.service.service_id;
      expect((await host.admin("POST", "/v1/admin/agents", agent("unsigning", "default", { type: "conversation", id: "unsigning" }, { runner_id: signed.runnerId() }))).status).toBe(201);
      const signature = async () => (await host.waitForRun((await host.postEvent(messageEvent("unsigning", "hi"))).body.run_id!), signed.calls.at(-1)!.headers["x-agent-signature"]);
      expect((await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: signed.url })).body.service.has_secret).toBe(true);
      expect(await signature()).toMatch(/^v1=/);
      // What GET answered can be sent back as it is (its read-only fields ignored): the secret is kept.
      const shown = (await host.admin("GET", `/v1/admin/runner-services/${serviceId}`)).body;
      const resent = await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, shown);
      expect([resent.status, resent.body.service?.has_secret]).toEqual([200, true]);
      expect((await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { ...shown, service_id: "svc_other" })).status).toBe(400);
      const dropped = await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: signed.url, secret: null });
      expect([dropped.status, dropped.body.service.has_secret]).toEqual([200, false]);
      expect(await signature()).toBeUndefined();
      expect((await host.admin("DELETE", "/v1/admin/agents/unsigning")).status).toBe(200);
    } finally {
      await signed.close();
    }
  });

  it("fails a run still waiting when its agent and runner service are deleted, and calls no one in its place", async () => {
    const leaving = await startAdHocRunner({ name: "leaving", onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("should not run") });
    try {
      const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: leaving.url });
      const waits = agent("leaving", "default", { type: "conversation", id: "leaving" }, { runner_id: leaving.runnerId(), concurrency: { debounce_ms: 5000 } });
      expect((await host.admin("POST", "/v1/admin/agents", waits)).status).toBe(201);
      const posted = await host.postEvent(messageEvent("leaving", "hi"));
      // Left waiting (by default the DELETE would cancel it): it fails at its turn, its agent and runner gone.
      expect((await host.admin("DELETE", "/v1/admin/agents/leaving?runs=leave")).status).toBe(200);
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${reg.body.service.service_id}`)).status).toBe(204);
      expect(await host.waitForRun(posted.body.run_id!)).toMatchObject({ status: "failed", error: { code: "host.agent_unavailable", message: expect.stringMatching(/deleted/) } });
      expect(leaving.calls).toEqual([]);
    } finally {
      await leaving.close();
    }
  });

  it("answers 502 for an unreachable service, a manifest that never ends or an answer that is not a manifest, and 400 for a bad body", async () => {
    expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: "http://127.0.0.1:9/" })).status).toBe(502);
    const notManifest = await listenLoopback((_req, res) => void res.writeHead(200, { "content-type": "application/json" }).end('{"hello":"world"}'));
    try {
      const refused = await host.admin("POST", "/v1/admin/runner-services", { base_url: notManifest.url });
      expect([refused.status, refused.body.error.code]).toEqual([502, "bad_gateway"]);
    } finally {
      await notManifest.close();
    }
    // An endless manifest is cut at its 1 MiB cap, not read until the fetch times out.
    const endless = await listenLoopback((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const more = () => { while (res.write(chunk)); };
      res.on("drain", more);
      more();
    });
    try {
      const started = Date.now();
      const refused = await host.admin("POST", "/v1/admin/runner-services", { base_url: endless.url });
      expect([refused.status, refused.body.error.message]).toEqual([502, `${endless.url}/manifest is larger than 1048576 bytes`]);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await endless.close();
    }
    expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: "ftp://x" })).status).toBe(400);
    expect((await host.admin("POST", "/v1/admin/runner-services/svc_missing/refresh")).status).toBe(404);
  });

  it("answers 502 for a manifest answered with a redirect and never fetches where it points, as run requests never do", async () => {
    // Where the redirect points: a valid manifest, at an address the operator never registered (another host, an internal one).
    let elsewhereCalls = 0;
    const elsewhere = await listenLoopback((_req, res) => {
      elsewhereCalls++;
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ protocol: "agent-runner/v1", author: "tests", name: "bounced", version: "1", runners: [{ name: "default", label: { en_US: "b" } }] }));
    });
    const bouncer = await listenLoopback((_req, res) => void res.writeHead(302, { location: `${elsewhere.url}/manifest` }).end());
    try {
      const refused = await host.admin("POST", "/v1/admin/runner-services", { base_url: bouncer.url });
      expect([refused.status, refused.body.error?.code]).toEqual([502, "bad_gateway"]);
      expect(refused.body.error.message).toMatch(/HTTP 302.*redirect/);
      expect(elsewhereCalls).toBe(0);
      const services = await host.admin("GET", "/v1/admin/runner-services");
      expect(services.body.items.map((s: { base_url: string }) => s.base_url)).not.toContain(bouncer.url);
    } finally {
      await bouncer.close();
      await elsewhere.close();
    }
  });

  it("checks runner_config against the runner's required config fields", async () => {
    const missing = await host.admin("POST", "/v1/admin/agents", agent("cfg-missing", "alpha", { type: "bot", id: "bot-cfg" }));
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/api_key/);
    // A field sent as null is not given.
    const asNull = await host.admin("POST", "/v1/admin/agents", agent("cfg-null", "alpha", { type: "bot", id: "bot-cfg" }, { runner_config: { api_key: null } }));
    expect([asNull.status, asNull.body.error.message]).toEqual([400, expect.stringMatching(/api_key/)]);
    const ok = await host.admin("POST", "/v1/admin/agents", agent("cfg-ok", "alpha", { type: "bot", id: "bot-cfg" }, { runner_config: { api_key: "k" } }));
    expect(ok.status).toBe(201);
    expect((await host.admin("POST", "/v1/admin/agents", agent("cfg-x", "nope", { type: "bot", id: "bot-x" }))).status).toBe(400);
  });

  it("shows secret runner_config fields masked; what GET showed can be sent back and keeps the secret the runner gets", async () => {
    const secretAgent = agent("cfg-secret", "alpha", { type: "conversation", id: "cfg-secret" }, { runner_config: { api_key: "sk-live-0123456789", region: "eu" } });
    const created = await host.admin("POST", "/v1/admin/agents", secretAgent);
    expect(created.status).toBe(201);
    expect(created.body.runner_config).toEqual({ api_key: "********", region: "eu" });
    const shown = await host.admin("GET", "/v1/admin/agents/cfg-secret");
    expect(shown.body.runner_config).toEqual({ api_key: "********", region: "eu" });
    const listed = await host.admin("GET", "/v1/admin/agents");
    expect(JSON.stringify(listed.body)).not.toContain("sk-live-0123456789");
    // Masked by its runner's schema: only the secret field.
    expect(listed.body.items.find((a: { agent_id: string }) => a.agent_id === "cfg-secret").runner_config).toEqual({ api_key: "********", region: "eu" });
    const reply = async () => (await host.waitForRun((await host.postEvent(messageEvent("cfg-secret", "hi"))).body.run_id!)).message?.content;

    // Sent back as shown (with another field changed): the stored secret stays.
    const put = await host.admin("PUT", "/v1/admin/agents/cfg-secret", { ...shown.body, runner_config: { ...shown.body.runner_config, region: "us" } });
    expect([put.status, put.body.runner_config]).toEqual([200, { api_key: "********", region: "us" }]);
    expect(await reply()).toBe("alpha for cfg-secret with sk-live-0123456789");
    // A new value replaces it.
    expect((await host.admin("PUT", "/v1/admin/agents/cfg-secret", { ...secretAgent, runner_config: { api_key: "sk-live-rotated" } })).status).toBe(200);
    expect(await reply()).toBe("alpha for cfg-secret with sk-live-rotated");
    // The mask with nothing stored behind it is refused, never kept as the secret.
    const masked = await host.admin("POST", "/v1/admin/agents", agent("cfg-masked", "alpha", { type: "conversation", id: "cfg-masked" }, { runner_config: { api_key: "********" } }));
    expect([masked.status, masked.body.error.details]).toEqual([400, { masked: ["api_key"] }]);
  });

  it("refuses an admin body over 1 MiB with 413, declared or streamed, and creates nothing (a run's cancel too)", async () => {
    const big = JSON.stringify(agent("too-big", "beta", { type: "conversation", id: "too-big" }, { description: "x".repeat(1024 * 1024) }));
    const headers = { authorization: `Bearer ${host.adminToken}`, "content-type": "application/json" };
    const declared = await fetch(`${host.url}/v1/admin/agents`, { method: "POST", headers, body: big });
    const bytes = new TextEncoder().encode(big);
    const streamed = await fetch(`${host.url}/v1/admin/agents`, {
      method: "POST",
      headers,
      body: new ReadableStream({ pull: (ctl) => (ctl.enqueue(bytes), ctl.close()) }),
      duplex: "half",
    } as RequestInit);
    for (const res of [declared, streamed]) expect([res.status, ((await res.json()) as any).error.code]).toEqual([413, "payload_too_large"]);
    expect((await host.admin("GET", "/v1/admin/agents/too-big")).status).toBe(404);
    // The operator's routes outside /v1/admin take the same cap: a run's cancel (which takes no body) is not made to hold one whole first.
    for (const body of [big, new ReadableStream({ pull: (ctl) => (ctl.enqueue(bytes), ctl.close()) })]) {
      const cancel = await fetch(`${host.url}/v1/runs/run_unknown/cancel`, { method: "POST", headers, body, duplex: "half" } as RequestInit);
      expect([cancel.status, ((await cancel.json()) as any).error.code]).toEqual([413, "payload_too_large"]);
    }
  });

  it("refuses a second enabled agent on the same scope and event type with 409", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent("dup-1", "beta", { type: "workspace", id: "ws-dup" }))).status).toBe(201);
    const clash = await host.admin("POST", "/v1/admin/agents", agent("dup-2", "beta", { type: "workspace", id: "ws-dup" }));
    expect(clash.status).toBe(409);
    expect(clash.body.error.message).toMatch(/dup-1/);
    expect(clash.body.error.details).toEqual({ conflicts: [{ agent_id: "dup-1", event_type: "message.received" }] });
    // Disabled, it may exist; enabling it through PUT is refused the same way.
    expect((await host.admin("POST", "/v1/admin/agents", agent("dup-2", "beta", { type: "workspace", id: "ws-dup" }, { enabled: false }))).status).toBe(201);
    expect((await host.admin("PUT", "/v1/admin/agents/dup-2", agent("dup-2", "beta", { type: "workspace", id: "ws-dup" }, { enabled: true }))).status).toBe(409);
    // Once the first is deleted, the second can take the scope.
    expect((await host.admin("DELETE", "/v1/admin/agents/dup-1")).status).toBe(200);
    expect((await host.admin("PUT", "/v1/admin/agents/dup-2", agent("dup-2", "beta", { type: "workspace", id: "ws-dup" }, { enabled: true }))).status).toBe(200);
    expect((await host.admin("GET", "/v1/admin/agents/dup-1")).status).toBe(404);
  });

  it("keeps a paused agent paused through a PUT that leaves enabled out (its other fields replaced); only enabled: true resumes it", async () => {
    const scope = { type: "conversation", id: "paused-put" };
    expect((await host.admin("POST", "/v1/admin/agents", agent("paused-put", "beta", scope, { enabled: false, description: "first" }))).status).toBe(201);
    // A configuration pushed again without `enabled` (a config file, a script): its description is replaced, the pause kept.
    const pushed = await host.admin("PUT", "/v1/admin/agents/paused-put", agent("paused-put", "beta", scope, { description: "second" }));
    expect([pushed.status, pushed.body.enabled, pushed.body.description]).toEqual([200, false, "second"]);
    const meanwhile = await host.postEvent(messageEvent("paused-put", "anyone?"));
    expect([meanwhile.status, meanwhile.body.run_id]).toEqual([202, null]);
    const resumed = await host.admin("PUT", "/v1/admin/agents/paused-put", agent("paused-put", "beta", scope, { enabled: true }));
    expect([resumed.status, resumed.body.enabled, resumed.body.description]).toEqual([200, true, undefined]);
    const ev = await host.postEvent(messageEvent("paused-put", "now?"));
    expect((await host.waitForRun(ev.body.run_id!)).message?.content).toBe("beta for paused-put");
    // An enabled agent stays enabled the same way.
    expect((await host.admin("PUT", "/v1/admin/agents/paused-put", agent("paused-put", "beta", scope))).body.enabled).toBe(true);
  });

  it("binds each event to the most specific enabled scope", async () => {
    for (const [id, scope] of [
      ["spec-ws", { type: "workspace", id: "ws-spec" }],
      ["spec-bot", { type: "bot", id: "bot-spec" }],
      ["spec-conv", { type: "conversation", id: "conv-spec" }],
    ] as const) {
      expect((await host.admin("POST", "/v1/admin/agents", agent(id, "beta", scope))).status).toBe(201);
    }
    const answer = async (ev: Record<string, unknown>) => {
      const res = await host.postEvent(ev);
      return (await host.waitForRun(res.body.run_id!)).message?.content;
    };
    const base = { workspace_id: "ws-spec", bot_id: "bot-spec" };
    expect(await answer(messageEvent("conv-spec", "hi", base))).toBe("beta for spec-conv");
    expect(await answer(messageEvent("conv-other", "hi", base))).toBe("beta for spec-bot");
    expect(await answer(messageEvent("conv-other", "hi", { workspace_id: "ws-spec", bot_id: "bot-else" }))).toBe("beta for spec-ws");
    const none = await host.postEvent(messageEvent("conv-other", "hi", { workspace_id: "ws-none" }));
    expect(none.body.disposition).toBe("unbound");
  });

  it("scopes a conversation to one bot when asked: chat ids are unique per platform, not per bot", async () => {
    for (const [id, scope] of [
      ["room-any", { type: "conversation", id: "room" }],
      ["room-bot-a", { type: "conversation", id: "room", bot_id: "bot-a" }],
      ["room-bot-b", { type: "bot", id: "bot-b" }],
    ] as const) {
      expect((await host.admin("POST", "/v1/admin/agents", agent(id, "beta", scope))).status).toBe(201);
    }
    expect((await host.admin("GET", "/v1/admin/agents/room-bot-a")).body.scope).toEqual({ type: "conversation", id: "room", bot_id: "bot-a" });
    const answer = async (botId: string) => (await host.waitForRun((await host.postEvent(messageEvent("room", "hi", { bot_id: botId }))).body.run_id!)).message?.content;
    // Bot A's own binding of the room outranks the room of any bot, which outranks a bot's own scope.
    expect(await answer("bot-a")).toBe("beta for room-bot-a");
    expect(await answer("bot-b")).toBe("beta for room-any");
    // The same room and bot twice is a conflict; the same room for another bot is not.
    expect((await host.admin("POST", "/v1/admin/agents", agent("room-bot-a2", "beta", { type: "conversation", id: "room", bot_id: "bot-a" }))).status).toBe(409);
    expect((await host.admin("POST", "/v1/admin/agents", agent("room-bot-c", "beta", { type: "conversation", id: "room", bot_id: "bot-c" }))).status).toBe(201);
    const misplaced = await host.admin("POST", "/v1/admin/agents", agent("bad-bot-id", "beta", { type: "bot", id: "bot-x", bot_id: "bot-x" }));
    expect([misplaced.status, misplaced.body.error.message]).toEqual([400, expect.stringMatching(/bot_id is only for conversation scopes/)]);
  });

  it("scopes a conversation to one workspace when asked: callers name their conversations per workspace", async () => {
    for (const [id, scope] of [
      ["desk-acme", { type: "conversation", id: "desk", workspace_id: "ws-acme" }],
      ["desk-any", { type: "conversation", id: "desk" }],
      ["desk-bot", { type: "conversation", id: "desk", bot_id: "bot-desk" }],
    ] as const) {
      expect((await host.admin("POST", "/v1/admin/agents", agent(id, "beta", scope))).status).toBe(201);
    }
    expect((await host.admin("GET", "/v1/admin/agents/desk-acme")).body.scope).toEqual({ type: "conversation", id: "desk", workspace_id: "ws-acme" });
    const answer = async (where: Record<string, string>) =>
      (await host.waitForRun((await host.postEvent(messageEvent("desk", "hi", where))).body.run_id!)).message?.content;
    // Acme's desk is Acme's alone; another workspace's desk, or one with no workspace, is not it.
    expect(await answer({ workspace_id: "ws-acme" })).toBe("beta for desk-acme");
    expect(await answer({ workspace_id: "ws-other" })).toBe("beta for desk-any");
    expect(await answer({})).toBe("beta for desk-any");
    // One bot's view of the conversation is more specific still.
    expect(await answer({ workspace_id: "ws-acme", bot_id: "bot-desk" })).toBe("beta for desk-bot");
    expect((await host.admin("POST", "/v1/admin/agents", agent("desk-acme2", "beta", { type: "conversation", id: "desk", workspace_id: "ws-acme" }))).status).toBe(409);
    const both = await host.admin("POST", "/v1/admin/agents", agent("desk-both", "beta", { type: "conversation", id: "desk", workspace_id: "ws-acme", bot_id: "bot-desk" }));
    expect([both.status, both.body.error.message]).toEqual([400, expect.stringMatching(/bot_id or workspace_id, not both/)]);
    const misplaced = await host.admin("POST", "/v1/admin/agents", agent("desk-ws", "beta", { type: "workspace", id: "ws-acme", workspace_id: "ws-acme" }));
    expect([misplaced.status, misplaced.body.error.message]).toEqual([400, expect.stringMatching(/workspace_id is only for conversation scopes/)]);
  });

  it("answers a method an admin route does not take with 405 and Allow, after the admin token, and a path no route takes with 404", async () => {
    const serviceId = (await host.admin("GET", "/v1/admin/runner-services")).body.items[0].service_id;
    const call = async (method: string, path: string, token = host.adminToken) => {
      const res = await fetch(`${host.url}${path}`, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: method === "GET" || method === "HEAD" ? undefined : "{}" });
      return { status: res.status, allow: res.headers.get("allow"), body: method === "HEAD" ? null : ((await res.json()) as any) };
    };
    for (const [method, path, allow] of [
      ["PATCH", "/v1/admin/agents/anyone", "GET, HEAD, PUT, DELETE"],
      ["DELETE", "/v1/admin/agents", "GET, HEAD, POST"],
      ["POST", `/v1/admin/runner-services/${serviceId}`, "GET, HEAD, DELETE, PUT"],
      ["GET", `/v1/admin/runner-services/${serviceId}/refresh`, "POST"],
      ["POST", "/v1/admin/runners", "GET, HEAD"],
      ["GET", "/v1/admin/secrets/reseal", "POST"],
      ["PATCH", "/v1/admin/bots/anyone", "GET, HEAD, PUT, DELETE"],
    ] as const) {
      const res = await call(method, path);
      expect(res, `${method} ${path}`).toEqual({ status: 405, allow, body: { error: { code: "method_not_allowed", message: `${path} takes ${allow}, not ${method}`, details: { allow } } } });
    }
    // The admin token first: a wrong method tells an anonymous caller no more than a right one.
    expect((await call("PATCH", "/v1/admin/agents/anyone", "wrong-token")).status).toBe(401);
    expect((await call("HEAD", "/v1/admin/agents")).status).toBe(200);
    expect(await call("GET", "/v1/admin/nothing-here")).toMatchObject({ status: 404, allow: null, body: { error: { code: "not_found" } } });
  });

  it("validates agent bodies with zod and answers 404 for unknown agents", async () => {
    const bad = await host.admin("POST", "/v1/admin/agents", { name: "x", runner_id: "r", event_types: ["not.a.type"], scope: { type: "bot" } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/event_types/);
    expect(bad.body.error.message).toMatch(/scope/);
    // A NUL would be stored whole but read back cut short, showing a scope it is not.
    const nul = await host.admin("POST", "/v1/admin/agents", { name: "x", runner_id: "r", scope: { type: "conversation", id: "lobby\u0000x" } });
    expect([nul.status, nul.body.error.message]).toEqual([400, expect.stringMatching(/scope\.id.*control characters/)]);
    expect((await host.admin("GET", "/v1/admin/agents/ghost")).status).toBe(404);
    expect((await host.admin("DELETE", "/v1/admin/agents/ghost")).status).toBe(404);
  });
});
