import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { listenLoopback, sendJson } from "../support/http-server";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({ name: "admin-int", onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply(`hi from ${body.context.metadata.agent_id}`) });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const agentBody = (id: string, conv: string, runnerId = runner.runnerId()) => ({
  agent_id: id,
  name: id,
  runner_id: runnerId,
  event_types: ["message.received"],
  scope: { type: "conversation", id: conv },
});

/**
 * Admin writes checked by a route and then written: a concurrent write in
 * between must not leave an agent on a runner that does not exist or a
 * binding naming no agent (the database refuses such writes, migration
 * 0008). Also: npm start's own binding leaves an operator's changes alone,
 * and bot fields are validated like every other scope id and secret.
 */
describe("admin races", () => {
  it("a PUT racing a DELETE of the same agent answers 200 or 404 (never 500) and never leaves a binding behind for the deleted agent", async () => {
    const problems: string[] = [];
    for (let round = 0; round < 12; round++) {
      const id = `ghost-${round}`;
      const conv = `ghost-conv-${round}`;
      expect((await host.admin("POST", "/v1/admin/agents", agentBody(id, conv))).status).toBe(201);
      const [put, del] = await Promise.all([
        host.admin("PUT", `/v1/admin/agents/${id}`, { ...agentBody(id, conv), name: "renamed" }),
        host.admin("DELETE", `/v1/admin/agents/${id}`),
      ]);
      if (![200, 404].includes(put.status)) problems.push(`${id}: PUT answered ${put.status} ${JSON.stringify(put.body)}`);
      expect(del.status).toBe(200);
      // The agent is gone; its scope must be free for another agent.
      expect((await host.admin("GET", `/v1/admin/agents/${id}`)).status).toBe(404);
      const taker = await host.admin("POST", "/v1/admin/agents", agentBody(`taker-${round}`, conv));
      if (taker.status !== 201) problems.push(`${id} deleted, yet a new agent on its scope gets ${taker.status} ${JSON.stringify(taker.body)}`);
    }
    expect(problems).toEqual([]);
  });

  it("an agent created while its runner service is being deleted is refused, never left on a runner that does not exist", async () => {
    const orphans: string[] = [];
    for (let round = 0; round < 12; round++) {
      const svc = await startAdHocRunner({ name: `vanishing-${round}`, onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("ok") });
      try {
        const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: svc.url });
        expect(reg.status).toBe(201);
        const id = `orphan-${round}`;
        const [del, post] = await Promise.all([
          host.admin("DELETE", `/v1/admin/runner-services/${reg.body.service.service_id}`),
          new Promise((r) => setTimeout(r, round % 4)).then(() => host.admin("POST", "/v1/admin/agents", agentBody(id, `orphan-conv-${round}`, svc.runnerId()))),
        ]);
        // Whichever wins, the other is refused with a clear answer (the route's check, or the database's), never a 500.
        if (![204, 409].includes(del.status) || ![201, 400, 409].includes(post.status)) orphans.push(`${id}: DELETE ${del.status}, POST ${post.status} ${JSON.stringify(post.body)}`);
        // A 409 from the database's refusal names the runner, never an agent that "already exists" (it does not).
        if (post.status === 409 && /already exists/.test(JSON.stringify(post.body))) orphans.push(`${id}: POST 409 ${JSON.stringify(post.body)}`);
        if (del.status === 204 && post.status === 201) {
          const ev = await host.postEvent(messageEvent(`orphan-conv-${round}`, "hi"));
          orphans.push(`${id}: service deleted (204) and agent created (201) on ${svc.runnerId()}; event disposition ${ev.body.disposition}`);
        }
      } finally {
        await svc.close();
      }
    }
    expect(orphans).toEqual([]);
  });
});

describe("refresh racing an agent write", () => {
  it("a refresh that drops a runner never leaves an agent created meanwhile on that runner", async () => {
    const runners: Record<string, unknown>[] = [{ name: "keep", label: { en_US: "keep" } }, { name: "gone", label: { en_US: "gone" } }];
    const svc = await startAdHocRunner({ name: "shrinking", runners, onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("ok") });
    const orphans: string[] = [];
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: svc.url })).body.service.service_id;
      for (let round = 0; round < 16; round++) {
        runners[1] = { name: "gone", label: { en_US: "gone" } };
        expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
        runners.splice(1);
        const id = `on-gone-${round}`;
        const [refresh, post] = await Promise.all([
          host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`),
          new Promise((r) => setTimeout(r, round % 8)).then(() => host.admin("POST", "/v1/admin/agents", agentBody(id, `on-gone-conv-${round}`, svc.runnerId("gone")))),
        ]);
        if (![200, 409].includes(refresh.status) || ![201, 400, 409].includes(post.status)) orphans.push(`${id}: refresh ${refresh.status} ${JSON.stringify(refresh.body)}, POST ${post.status} ${JSON.stringify(post.body)}`);
        if (refresh.status === 200 && post.status === 201) {
          const ev = await host.postEvent(messageEvent(`on-gone-conv-${round}`, "hi"));
          orphans.push(`${id}: refresh dropped ${svc.runnerId("gone")} (200) and the agent on it was created (201); its event: ${ev.body.disposition}`);
        }
        if (post.status === 201) {
          runners[1] = { name: "gone", label: { en_US: "gone" } };
          await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`);
          await host.admin("DELETE", `/v1/admin/agents/${id}`);
        }
      }
    } finally {
      await svc.close();
    }
    expect(orphans).toEqual([]);
  });
});

describe("grants racing deletes of what they grant", () => {
  const model = (id: string) => ({ model_id: id, name: id, kind: "llm", base_url: "http://127.0.0.1:9/v1", api_key: "sk-race-0123456789", model: "x" });
  const granting = (id: string, resource_policy: Record<string, string[]>) => ({ ...agentBody(id, `${id}-conv`), resource_policy });

  it("an agent saved while the model it grants is deleted: one of the two writes is refused, never both done", async () => {
    const broken: string[] = [];
    for (let i = 0; i < 12; i++) {
      expect((await host.admin("POST", "/v1/admin/models", model(`race-m${i}`))).status).toBe(201);
      const [agent, deleted] = await Promise.all([host.admin("POST", "/v1/admin/agents", granting(`race-a${i}`, { models: [`race-m${i}`] })), host.admin("DELETE", `/v1/admin/models/race-m${i}`)]);
      expect([[201, 409], [400, 204], [409, 204]]).toContainEqual([agent.status, deleted.status]);
      if (agent.status === 201 && deleted.status === 204) broken.push(`race-a${i}`);
    }
    expect(broken).toEqual([]);
  });

  it("the database itself refuses an agent granting what is not registered, and deleting what an agent grants", async () => {
    expect((await host.admin("POST", "/v1/admin/models", model("held"))).status).toBe(201);
    expect((await host.admin("POST", "/v1/admin/tools", { name: "held_tool", endpoint: "http://127.0.0.1:9/t" })).status).toBe(201);
    expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "held_kb", name: "kb", endpoint: "http://127.0.0.1:9/kb" })).status).toBe(201);
    const policy = { models: ["held"], fallback_models: ["held"], tools: ["held_tool"], knowledge_bases: ["held_kb"] };
    expect((await host.admin("POST", "/v1/admin/agents", granting("holder", policy))).status).toBe(201);
    // As a write racing the route's check would reach the database:
    const refusal = (sql: string, args: string[] = []) => host.query(sql, args).then(() => "done", (err: Error) => /integrity: (\w+)/.exec(err.message)?.[1] ?? err.message);
    expect(await refusal("DELETE FROM model WHERE model_id = 'held'")).toBe("resource_granted");
    expect(await refusal("DELETE FROM tool WHERE tool_name = 'held_tool'")).toBe("resource_granted");
    expect(await refusal("DELETE FROM knowledge_base WHERE kb_id = 'held_kb'")).toBe("resource_granted");
    for (const group of ["models", "fallback_models", "tools", "knowledge_bases"]) {
      const missing = JSON.stringify({ ...policy, [group]: ["missing"] });
      expect([group, await refusal("UPDATE agent SET resource_policy_json = ? WHERE agent_id = 'holder'", [missing])]).toEqual([group, "agent_grant_not_registered"]);
    }
    // Without the grants, all of it goes.
    expect((await host.admin("PUT", "/v1/admin/agents/holder", granting("holder", {}))).status).toBe(200);
    expect(await refusal("DELETE FROM model WHERE model_id = 'held'")).toBe("done");
    expect((await host.admin("DELETE", "/v1/admin/tools/held_tool")).status).toBe(204);
  });
});

describe("runner_config racing a refresh that requires a field", () => {
  /** A service whose runner's config_schema says `region.code` is required when `requireRegion` is set (a name with a dot: no JSON path). */
  let requireRegion = false;
  const schema = () => [
    { name: "region.code", type: "string", label: { en_US: "Region" }, required: requireRegion },
    { name: "mode", type: "string", label: { en_US: "Mode" }, required: true, default: "fast" },
  ];
  const configured = (id: string, runnerId: string, runner_config: Record<string, unknown>) => ({ ...agentBody(id, `${id}-conv`, runnerId), runner_config });

  it("an agent saved while a refresh makes a field it lacks required: one of the two writes is refused, never both done", async () => {
    // The manifest is built anew for each refresh: its runner's schema follows requireRegion.
    const service = await listenLoopback((_req, res) =>
      sendJson(res, 200, { protocol: "agent-runner/v1", author: "tests", name: "requiring", version: "1", runners: [{ name: "default", label: { en_US: "requiring" }, config_schema: schema() }] }),
    );
    const broken: string[] = [];
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: service.url })).body.service.service_id;
      const runnerId = "http:tests/requiring/default";
      expect((await host.admin("POST", "/v1/admin/agents", configured("racer", runnerId, { "region.code": "eu" }))).status).toBe(201);
      for (let round = 0; round < 16; round++) {
        requireRegion = true;
        const [refresh, put] = await Promise.all([
          host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`),
          new Promise((r) => setTimeout(r, round % 8)).then(() => host.admin("PUT", "/v1/admin/agents/racer", configured("racer", runnerId, {}))),
        ]);
        expect([[200, 400], [200, 409], [409, 200]]).toContainEqual([refresh.status, put.status]);
        if (refresh.status === 200 && put.status === 200) broken.push(`round ${round}`);
        requireRegion = false;
        expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
        expect((await host.admin("PUT", "/v1/admin/agents/racer", configured("racer", runnerId, { "region.code": "eu" }))).status).toBe(200);
      }
      expect(broken).toEqual([]);

      // As such a racing write reaches the database: refused there, whichever comes second.
      const refusal = (sql: string, args: string[] = []) => host.query(sql, args).then(() => "done", (err: Error) => /integrity: (\w+)/.exec(err.message)?.[1] ?? err.message);
      const manifestWith = (item: Record<string, unknown>) => JSON.stringify({ name: "default", label: { en_US: "requiring" }, config_schema: [item] });
      expect((await host.admin("PUT", "/v1/admin/agents/racer", configured("racer", runnerId, {}))).status).toBe(200);
      const update = (item: Record<string, unknown>) => refusal("UPDATE runner SET manifest_json = ? WHERE runner_id = ?", [manifestWith(item), runnerId]);
      expect(await update({ name: "region.code", type: "string", required: true })).toBe("runner_config_required");
      expect(await update({ name: "region.code", type: "string", required: true, default: null })).toBe("runner_config_required");
      expect(await update({ name: "region.code", type: "string", required: true, default: "eu" })).toBe("done");
      expect(await update({ name: "region.code", type: "string", required: true })).toBe("runner_config_required");
      expect(await refusal("UPDATE agent SET runner_config_json = ? WHERE agent_id = 'racer'", ['{"region.code":"eu"}'])).toBe("done");
      expect(await update({ name: "region.code", type: "string", required: true })).toBe("done");
      for (const config of ["{}", '{"region.code":null}', '{"region":"eu"}']) {
        expect([config, await refusal("UPDATE agent SET runner_config_json = ? WHERE agent_id = 'racer'", [config])]).toEqual([config, "agent_config_incomplete"]);
      }

      // An agent an earlier release left lacking a required field (before these triggers): what does not make it
      // worse still goes (its values resealed, a manifest requiring nothing new), so it never blocks other writes.
      const triggers = readFileSync(join(ROOT, "migrations/0011_agent_config_integrity.sql"), "utf8").split("--> statement-breakpoint");
      for (const name of ["agent_config_complete_on_insert", "agent_config_complete_on_update", "runner_config_required_on_update"]) await host.query(`DROP TRIGGER ${name}`);
      await host.query("UPDATE agent SET runner_config_json = '{\"other\":\"x\"}' WHERE agent_id = 'racer'");
      for (const trigger of triggers) await host.query(trigger);
      expect(await refusal("UPDATE agent SET runner_config_json = '{\"other\":\"y\"}' WHERE agent_id = 'racer'")).toBe("done");
      expect(await update({ name: "region.code", type: "string", required: true, label: { en_US: "Region" } })).toBe("done");
      expect((await host.admin("POST", "/v1/admin/secrets/reseal")).status).toBe(200);
      expect((await host.admin("DELETE", "/v1/admin/agents/racer")).status).toBe(200);
    } finally {
      await service.close();
    }
  });
});

describe("refresh racing a DELETE of the service", () => {
  it("does not bring a runner service deleted while its manifest was fetched back", async () => {
    let slow = false;
    const manifest = { protocol: "agent-runner/v1", author: "tests", name: "deleted-midway", version: "1", runners: [{ name: "default", label: { en_US: "d" } }] };
    const svc = await listenLoopback(async (_req, res) => {
      if (slow) await new Promise((r) => setTimeout(r, 1500));
      sendJson(res, 200, manifest);
    });
    try {
      const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: svc.url });
      expect(reg.status).toBe(201);
      const id = reg.body.service.service_id;
      slow = true;
      const refreshing = host.admin("POST", `/v1/admin/runner-services/${id}/refresh`);
      await new Promise((r) => setTimeout(r, 500));
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${id}`)).status).toBe(204);
      const refreshed = await refreshing;
      expect({ refresh: refreshed.status, code: refreshed.body.error?.code, service: (await host.admin("GET", `/v1/admin/runner-services/${id}`)).status }).toEqual({ refresh: 404, code: "not_found", service: 404 });
      expect(await host.query("SELECT runner_id FROM runner WHERE runner_id = 'http:tests/deleted-midway/default'")).toEqual([]);
    } finally {
      await svc.close();
    }
  });
});

describe("npm start's binding against an operator's own configuration", () => {
  it("a restart of npm start (bindRunner) does not fail when the operator disabled echo and bound another global agent", async () => {
    const echo = await startAdHocRunner({ author: "examples", name: "echo", onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("echo") });
    try {
      const opts = { baseUrl: echo.url, runnerId: echo.runnerId(), agentId: "echo" };
      await host.bind(opts); // first npm start
      // The operator turns the example off and binds their own agent globally.
      const shown = await host.admin("GET", "/v1/admin/agents/echo");
      expect((await host.admin("PUT", "/v1/admin/agents/echo", { ...shown.body, enabled: false })).status).toBe(200);
      expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "mine", name: "mine", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" } })).status).toBe(201);
      // Next npm start: same binding call.
      let failure: string | null = null;
      await host.bind({ ...opts, keepExisting: true }).catch((err: Error) => (failure = err.message));
      expect(failure).toBeNull();
      expect((await host.admin("GET", "/v1/admin/agents/echo")).body.enabled).toBe(false);
    } finally {
      await host.admin("DELETE", "/v1/admin/agents/mine");
      await host.admin("DELETE", "/v1/admin/agents/echo");
      await echo.close();
    }
  });

  it("a restart of npm start does not bring back the example agent the operator deleted, nor fail on their own global agent", async () => {
    const echo = await startAdHocRunner({ author: "examples", name: "echo-deleted", onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply("echo") });
    // Other services of the operator's with more runners than a page of the listing (200) between them, their ids
    // sorting first; three, as a manifest lists at most 100.
    const many = await Promise.all(
      [0, 1, 2].map((n) =>
        listenLoopback((_req, res) =>
          sendJson(res, 200, { protocol: "agent-runner/v1", author: "acme", name: `many${n}`, version: "1", runners: Array.from({ length: 67 }, (_, i) => ({ name: `r${i}`, label: { en_US: `r${i}` } })) }),
        ),
      ),
    );
    try {
      const opts = { baseUrl: echo.url, runnerId: echo.runnerId(), agentId: "echo-deleted", keepExisting: true };
      expect(await host.bind({ ...opts, keepExisting: false })).toBe(true); // first npm start: bound
      expect((await host.admin("DELETE", "/v1/admin/agents/echo-deleted")).status).toBe(200);
      expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "mine", name: "mine", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" } })).status).toBe(201);
      const manyIds: string[] = [];
      for (const m of many) manyIds.push((await host.admin("POST", "/v1/admin/runner-services", { base_url: m.url })).body.service.service_id);
      // Next npm start: the same call neither fails nor makes the agent again.
      expect(await host.bind(opts)).toBe(false);
      expect((await host.admin("GET", "/v1/admin/agents/echo-deleted")).status).toBe(404);
      for (const id of manyIds) expect((await host.admin("DELETE", `/v1/admin/runner-services/${id}`)).status).toBe(204);
    } finally {
      await host.admin("DELETE", "/v1/admin/agents/mine");
      await Promise.all([echo.close(), ...many.map((m) => m.close())]);
    }
  });
});

describe("bots admin validation", () => {
  it("refuses a bot workspace_id with a control character, as every other scope id (events, agent scopes) is refused", async () => {
    const workspace = "acme\u0000corp";
    // The same id is refused as an agent scope and as an event's workspace_id ...
    const scope = await host.admin("POST", "/v1/admin/agents", { name: "x", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "workspace", id: workspace } });
    expect(scope.status).toBe(400);
    expect((await host.postEvent(messageEvent("c-nul", "hi", { workspace_id: workspace }))).status).toBe(400);
    // ... but a bot takes it, and stamps it on every event of its chats.
    const bot = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", workspace_id: workspace, credentials: { bot_token: "123:abc", secret_token: "s3cret-token-0123456789" } });
    // Observed when it is taken: a Telegram update to this bot is recorded with workspace_id "acme" (cut at the NUL),
    // and GET /v1/conversations/events with the bot's own workspace_id lists nothing.
    expect(bot.status).toBe(400);
  });

  it("refuses a guessable Telegram secret_token (the only thing that authenticates its webhook), as it refuses short Slack and runner secrets", async () => {
    const weak = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", credentials: { bot_token: "123:abc", secret_token: "a" } });
    if (weak.status === 201) {
      // Anyone can then post updates as any user: one of 64 guesses is accepted.
      const u = { update_id: 9, message: { message_id: 90, date: Math.floor(Date.now() / 1000), chat: { id: 7, type: "private" }, from: { id: 1, is_bot: false, first_name: "Mallory" }, text: "forged" } };
      let accepted = 0;
      for (const guess of "abc") {
        const res = await fetch(weak.body.webhook_url, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": guess }, body: JSON.stringify(u) });
        if (res.status === 200) accepted++;
      }
      expect(accepted).toBe(1);
    }
    expect(weak.status).toBe(400);
  });

  it("keeps a bot registered with a shorter secret_token (valid before the minimum) receiving its webhooks", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", {
      platform: "telegram",
      api_base_url: "http://127.0.0.1:9",
      credentials: { bot_token: "123456:OLD-bot-token", secret_token: "long-enough-secret-123" },
    });
    expect(created.status).toBe(201);
    // As an earlier release stored it (1-256 characters were accepted; a value stored before a key was set opens as it is).
    await host.query("UPDATE bot SET credentials_json = ? WHERE bot_id = ?", [JSON.stringify({ bot_token: "123456:OLD-bot-token", secret_token: "oldsecret" }), created.body.bot_id]);
    const update = { update_id: 1, message: { message_id: 1, date: 1, chat: { id: 42, type: "private" }, from: { id: 7, is_bot: false, first_name: "A" }, text: "hi" } };
    const post = (secret: string) => fetch(created.body.webhook_url, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": secret }, body: JSON.stringify(update) });
    expect((await post("oldsecret")).status).toBe(200);
    expect((await post("wrong")).status).toBe(401);
  });
});
