import { beforeAll, describe, expect, it } from "vitest";
import { messageEvent } from "../support/host";
import { listenLoopback } from "../support/http-server";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useAdminHost, type AdminHost } from "../support/admin-host";

/** The admin API's runner services: registering, refreshing, moving, their secrets, and what it answers for a service it cannot read. */
const admin = useAdminHost();
const { perms, agent } = admin;
let host: AdminHost["host"];
let runner: AdminHost["runner"];
beforeAll(() => void ({ host, runner } = admin));

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
});
