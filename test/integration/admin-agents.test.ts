import { beforeAll, describe, expect, it } from "vitest";
import { messageEvent } from "../support/host";
import { useAdminHost, type AdminHost } from "../support/admin-host";

/** The admin API's agents: runner_config checks and masking, body limits, scopes and binding resolution, routes and validation. */
const admin = useAdminHost();
const { agent } = admin;
let host: AdminHost["host"];
beforeAll(() => void ({ host } = admin));

describe("admin API: runner services, runners, agents and binding resolution", () => {
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
