import { describe, expect, it } from "vitest";
import type { EmbeddedDb } from "../../local/libsql";
import type { SqlQuery } from "../../src/db/executor";
import { recordingDbs } from "../support/recording-db";
import { agent, bot, knowledgeBase, model, runnerService } from "../../src/db/schema";
import { refuseIfGranted } from "../../src/agents/grants-in-use";
import { agentsStore } from "../../src/stores/agents";
import { agentRunsStore } from "../../src/stores/agent-runs";
import { runsStore } from "../../src/stores/runs";
import { selectPage } from "../../src/stores/list-page";
import { unboundReason } from "../../src/stores/unbound-reason";
import { resealStoredSecrets } from "../../src/stores/reseal";

/**
 * README (Admin API at scale): with thousands of agents and bots and hundreds of runner services, an admin read finds
 * its rows by index, never by reading (or sorting) a whole table. Checked on the plans SQLite makes for the statements
 * the stores send (EXPLAIN QUERY PLAN, migrations applied), and for the triggers, on the steps they cost.
 */
const openDb = recordingDbs();

/** A database with two runner services and a runner on each. */
async function open() {
  const opened = await openDb();
  const { run } = opened;
  await run(`INSERT INTO runner_service (service_id, base_url, created_at) VALUES ('svc', 'http://svc.test', 1), ('other', 'http://other.test', 2)`);
  await run(`INSERT INTO runner (runner_id, service_id, name, manifest_json, updated_at) VALUES ('http:a/s/one', 'svc', 'one', '{}', 1), ('http:a/o/two', 'other', 'two', '{}', 1)`);
  return opened;
}

/** `n` agents on `runnerId`, ids `{prefix}{i}`, each granting `policy`. */
const seedAgents = (run: (sql: string, params?: unknown[]) => Promise<unknown>, prefix: string, runnerId: string, n: number, policy = "{}") =>
  run(
    `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${n})
     INSERT INTO agent (agent_id, name, runner_id, event_types_json, scope_type, scope_id, resource_policy_json, enabled, created_at, updated_at)
     SELECT ? || i, 'n', ?, '["message.received"]', 'bot', 'bot-' || ? || i, ?, 1, i, i FROM c`,
    [prefix, runnerId, prefix, policy],
  );

/** The plan of each statement sent, one line per step. */
const plansOf = (e: EmbeddedDb, sent: SqlQuery[]) => sent.map((q) => e.rows<{ detail: string }>(`EXPLAIN QUERY PLAN ${q.sql}`, q.params).map((r) => r.detail));

/** A plan reads `table` by index only: no full scan of it, and no sort of what it read. */
function readsByIndex(plan: string[], table: string) {
  expect(plan.some((step) => new RegExp(`^(SCAN|SEARCH) ${table} USING (COVERING )?INDEX`).test(step)), plan.join(" | ")).toBe(true);
  expect(plan.filter((step) => new RegExp(`^SCAN ${table}$`).test(step) || /TEMP B-TREE/.test(step)), plan.join(" | ")).toEqual([]);
}

describe("admin reads at scale", () => {
  it("every admin listing ordered by creation reads its page from an index, the first page and a deep one alike", async () => {
    const { e, db, sent } = await open();
    // The orders of src/routes/admin/{agents,bots,runner-services,models,knowledge-bases}.ts.
    const listings = [
      [agent, { time: agent.createdAt, id: agent.agentId }, "agent"],
      [bot, { time: bot.createdAt, id: bot.botId }, "bot"],
      [runnerService, { time: runnerService.createdAt, id: runnerService.serviceId }, "runner_service"],
      [model, { time: model.createdAt, id: model.modelId }, "model"],
      [knowledgeBase, { time: knowledgeBase.createdAt, id: knowledgeBase.kbId }, "knowledge_base"],
    ] as const;
    for (const [table, order, name] of listings) {
      for (const after of [undefined, { time: 5, id: "x" }]) {
        sent.length = 0;
        await selectPage(db, table, order, { limit: 100, after });
        for (const plan of plansOf(e, sent)) {
          readsByIndex(plan, name);
          // A deep page starts at its position in the index, not at the index's first entry.
          if (after) expect(plan.join(" | ")).toMatch(new RegExp(`^SEARCH ${name} USING (COVERING )?INDEX ${name}_created \\(\\(created_at,\\w+\\)>\\(\\?,\\?\\)\\)`));
        }
      }
    }
  });

  it("reads the agents on a runner service's runners by runner, for its DELETE and for its refresh or move, and only their runner and config", async () => {
    const { e, db, sent, run } = await open();
    await seedAgents(run, "on-", "http:a/s/one", 3);
    await seedAgents(run, "elsewhere-", "http:a/o/two", 50);
    expect(await agentsStore(db).onService("svc", 2)).toEqual({ agentIds: ["on-1", "on-2"], total: 3 });
    const configs = await agentsStore(db).configsOnService("svc");
    expect(configs).toEqual(["on-1", "on-2", "on-3"].map((agentId) => ({ agentId, runnerId: "http:a/s/one", runnerConfigJson: "{}" })));
    expect(sent).toHaveLength(2);
    for (const plan of plansOf(e, sent)) {
      expect(plan.join(" | ")).toMatch(/SEARCH agent USING (COVERING )?INDEX agent_runner \(runner_id=\?\)/);
      expect(plan).not.toContain("SCAN agent");
    }
  });

  it("deletes a runner or saves its manifest at a cost that does not grow with the agents on other runners (migrations 0008, 0011)", async () => {
    const steps = async (agentsElsewhere: number) => {
      const { e, run } = await open();
      await run(`INSERT INTO runner (runner_id, service_id, name, manifest_json, updated_at) VALUES ('http:a/s/spare', 'svc', 'spare', '{}', 1)`);
      await seedAgents(run, "a-", "http:a/o/two", agentsElsewhere);
      await run(`UPDATE runner SET manifest_json = ? WHERE runner_id = 'http:a/s/spare'`, [JSON.stringify({ config_schema: [{ name: "k", type: "string", required: true }] })]);
      await run(`DELETE FROM runner WHERE runner_id = 'http:a/s/spare'`);
      // Steps of the two statements, their triggers included (cumulative per prepared statement).
      return Number(e.rows<{ n: number }>(`SELECT SUM(nstep) AS n FROM sqlite_stmt WHERE sql LIKE '%http:a/s/spare''%' AND sql NOT LIKE 'INSERT%' AND sql NOT LIKE '%sqlite_stmt%'`)[0].n);
    };
    const few = await steps(5);
    expect(few).toBeGreaterThan(0);
    expect(await steps(2000)).toBeLessThan(few * 2);
  });

  it("lists an agent's runs (GET /v1/runs?agent_id=) from its index, a deep page too; its runs not ended, listed or cancelled, from run_status", async () => {
    const { e, db, sent } = await open();
    const plan = async (filter: Partial<Parameters<ReturnType<typeof runsStore>["list"]>[0]>) => {
      sent.length = 0;
      await runsStore(db).list({ limit: 50, ...filter });
      return plansOf(e, sent).flat().join(" | ");
    };
    expect(await plan({ agentId: "a" })).toContain("SEARCH run USING INDEX run_agent (agent_id=?)");
    expect(await plan({ agentId: "a", status: "completed" })).toContain("SEARCH run USING INDEX run_agent (agent_id=?)");
    // The cursor is a range of the index: the hundredth page starts where it is, not at the agent's newest run.
    expect(await plan({ agentId: "a", before: { time: 5, id: "r" } })).toContain("SEARCH run USING INDEX run_agent (agent_id=? AND (created_at,run_id)<(?,?))");
    expect(await plan({ before: { time: 5, id: "r" } })).toContain("SEARCH run USING INDEX run_created ((created_at,run_id)<(?,?))");
    // Narrower than every run the agent had: its conversation's, or the few not ended (README: DELETE's cancel, `status=running`).
    expect(await plan({ agentId: "a", conversationId: "c" })).toContain("SEARCH run USING INDEX run_conversation_id (conversation_id=?)");
    expect(await plan({ agentId: "a", status: "running" })).toContain("SEARCH run USING INDEX run_status (status=?)");
    sent.length = 0;
    const asCreated = { agentId: "a", stateEpoch: "e" };
    await agentRunsStore(db).page(asCreated, "not_started", null, 100);
    await agentRunsStore(db).count(asCreated, "running", { createdAt: 1, runId: "r" });
    for (const steps of plansOf(e, sent)) expect(steps.join(" | ")).toMatch(/^(MULTI-INDEX OR \| INDEX 1 \| )?SEARCH run USING INDEX run_status \(status=\?/);
  });

  it("lists a bot's runs and a workspace's (GET /v1/runs?bot_id=, ?workspace_id=) from their indexes, a deep page too, never walking every run", async () => {
    const { e, db, sent } = await open();
    const plan = async (filter: Partial<Parameters<ReturnType<typeof runsStore>["list"]>[0]>) => {
      sent.length = 0;
      await runsStore(db).list({ limit: 50, ...filter });
      const steps = plansOf(e, sent).flat().join(" | ");
      expect(steps).not.toContain("USING INDEX run_created");
      return steps;
    };
    expect(await plan({ botId: "b" })).toContain("SEARCH run USING INDEX run_bot (bot_id=?)");
    expect(await plan({ botId: "b", status: "completed" })).toContain("SEARCH run USING INDEX run_bot (bot_id=?)");
    expect(await plan({ botId: "b", before: { time: 5, id: "r" } })).toContain("SEARCH run USING INDEX run_bot (bot_id=? AND (created_at,run_id)<(?,?))");
    expect(await plan({ workspaceId: "w" })).toContain("SEARCH run USING INDEX run_workspace (workspace_id=?)");
    expect(await plan({ workspaceId: "w", before: { time: 5, id: "r" } })).toContain("SEARCH run USING INDEX run_workspace (workspace_id=? AND (created_at,run_id)<(?,?))");
    // A bot is narrower than its workspace; a conversation, the runs not ended and an agent's runs narrower still.
    expect(await plan({ workspaceId: "w", botId: "b" })).toContain("SEARCH run USING INDEX run_bot (bot_id=?)");
    expect(await plan({ botId: "b", conversationId: "c" })).toContain("SEARCH run USING INDEX run_conversation_id (conversation_id=?)");
    expect(await plan({ workspaceId: "w", status: "running" })).toContain("SEARCH run USING INDEX run_status (status=?)");
    expect(await plan({ botId: "b", agentId: "a" })).toContain("SEARCH run USING INDEX run_agent (agent_id=?)");
  });

  it("reads why an event went unbound from the agents of its scopes only", async () => {
    const { e, db, sent, run } = await open();
    await seedAgents(run, "a-", "http:a/o/two", 20);
    await run(`UPDATE agent SET enabled = 0 WHERE agent_id = 'a-7'`);
    expect(await unboundReason(db, { eventType: "message.received", conversationId: "c1", botId: "bot-a-7" })).toBe(`agent a-7 (scope {"type":"bot","id":"bot-a-7"}) is disabled`);
    for (const plan of plansOf(e, sent)) {
      expect(plan, plan.join(" | ")).toContain("SEARCH agent USING INDEX agent_scope (scope_type=? AND scope_id=?)");
      expect(plan).not.toContain("SCAN agent");
    }
  });

  it("names the agents granting a resource about to be deleted from their grants, never reading agents whole", async () => {
    const { db, sent, run } = await open();
    await run(`INSERT INTO model (model_id, name, kind, base_url, api_key, provider_model, created_at) VALUES ('m1', 'm1', 'llm', 'http://m.test', 'k', 'p', 1), ('m10', 'm10', 'llm', 'http://m.test', 'k', 'p', 1)`);
    await run(`INSERT INTO tool (tool_name, created_at) VALUES ('srv.a', 1), ('srv.b', 1), ('srv2.a', 1)`);
    await seedAgents(run, "plain-", "http:a/o/two", 30);
    await seedAgents(run, "uses-", "http:a/o/two", 1, JSON.stringify({ models: ["m10"], tools: ["srv.a", "srv2.a"] }));
    await seedAgents(run, "falls-back-", "http:a/o/two", 1, JSON.stringify({ models: ["m10"], fallback_models: ["m1"] }));
    const refusal = (p: Promise<void>) => p.then(() => undefined, (err: { status: number; details?: { agents: string[] } }) => err.details?.agents);

    expect(await refusal(refuseIfGranted(db, "models", "model m1", "m1", (id) => id === "m1"))).toEqual(["falls-back-1"]);
    expect(await refusal(refuseIfGranted(db, "models", "model m10", "m10", (id) => id === "m10"))).toEqual(["falls-back-1", "uses-1"]);
    // An MCP server's tools (`srv.`), one of them still listed: never another server's whose name starts alike.
    expect(await refusal(refuseIfGranted(db, "tools", "a tool of srv", "srv.", (id) => id.startsWith("srv.") && id !== "srv.a"))).toBeUndefined();
    expect(await refusal(refuseIfGranted(db, "tools", "a tool of srv", "srv.", (id) => id.startsWith("srv.")))).toEqual(["uses-1"]);
    expect(await refusal(refuseIfGranted(db, "knowledge_bases", "knowledge base k", "k", (id) => id === "k"))).toBeUndefined();
    // Only ids and grants travel: no other column of an agent is read.
    expect(sent.map((q) => q.sql).filter((s) => /runner_config_json|state_policy_json|delivery_policy_json|event_types_json/.test(s))).toEqual([]);
  });

  it("reseals every credential reading only the columns sealing takes: not agents, bots or manifests whole", async () => {
    const { e, db, sent, run } = await open();
    const manifest = { name: "one", config_schema: [{ name: "token", type: "secret" }], padding: "x".repeat(100_000) };
    await run(`UPDATE runner SET manifest_json = ? WHERE runner_id = 'http:a/s/one'`, [JSON.stringify(manifest)]);
    await seedAgents(run, "a-", "http:a/s/one", 3);
    await run(`UPDATE agent SET runner_config_json = '{"token":"plain","region":"eu"}'`);
    expect((await resealStoredSecrets(db)).resealed.agents).toBe(3);
    const configs = e.rows<{ c: string }>("SELECT runner_config_json AS c FROM agent").map((r) => JSON.parse(r.c));
    expect(configs.every((c) => c.region === "eu" && String(c.token).startsWith("sealed:"))).toBe(true);
    const reads = sent.map((q) => q.sql).filter((s) => s.startsWith("select"));
    const whole = (s: string) => /delivery_policy_json|last_webhook_refusal_json/.test(s) || (/from "runner(_service)?"/.test(s) && /"manifest_json"/.test(s) && !/json_extract/.test(s));
    expect(reads.filter(whole)).toEqual([]);
  });
});
