import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEchoRunner } from "../../examples/echo-runner/runner";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let echo: Awaited<ReturnType<typeof startEchoRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "conform",
    runners: [
      {
        name: "default",
        label: { en_US: "conform" },
        permissions: { history: ["page"] },
        config_schema: [{ name: "mode", type: "string", label: { en_US: "Mode" }, required: true, default: "fast" }],
      },
      // A required field whose default is null: null is no value, here as in a runner_config.
      { name: "keyed", label: { en_US: "keyed" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" }, required: true, default: null }] },
    ],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const text = ctx.input.text;
      if (text === "tool-telemetry") {
        // LangBot-style telemetry: tool.call.* payloads are loose (PROTOCOL §7). Here the tool_call_id is a number.
        w.send("tool.call.started", { tool_call_id: 7, tool_name: "search", parameters: { q: "x" } });
        w.send("tool.call.completed", { tool_name: "search", result: { hits: 1 } });
        return w.reply("done");
      }
      if (text === "actions") {
        // action.requested is strict (§7): recorded only, and one whose target is no object is dropped like any strict payload.
        w.send("action.requested", { action: "send_email", target: { to: "ops@example.com" }, payload: { subject: "hi" } });
        w.send("action.requested", { action: "send_email", target: "ops@example.com" });
        return w.reply("asked");
      }
      if (text === "seq-from-zero") {
        // A runner that numbers its results from 0: §7 says the host warns on gaps/reordering and drops duplicates.
        res.write(`${JSON.stringify({ run_id: ctx.run_id, type: "message.completed", data: { message: { role: "assistant", content: "zero" } }, sequence: 0 })}\n`);
        res.write(`${JSON.stringify({ run_id: ctx.run_id, type: "run.completed", data: { finish_reason: "stop" }, sequence: 1 })}\n`);
        res.end();
        return;
      }
      return w.reply("ok");
    },
  });
  echo = await startEchoRunner();
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "conform" });
  await host.bind({ baseUrl: echo.url, runnerId: "http:examples/echo/default", agentId: "echo-conform", scope: { type: "conversation", id: "conform-stateless" } });
  const edited = await host.admin("PUT", "/v1/admin/agents/echo-conform", {
    agent_id: "echo-conform",
    name: "echo-conform",
    runner_id: "http:examples/echo/default",
    event_types: ["message.received"],
    scope: { type: "conversation", id: "conform-stateless" },
    state_policy: { enable_state: false },
  });
  expect(edited.status).toBe(200);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await echo?.close();
});

/**
 * PROTOCOL §5/§7 details a runner author relies on: config_schema defaults
 * reach ctx.config, tool.call.* telemetry is loose (kept, never dropped),
 * action.requested is strict and recorded only, a
 * result numbered from 0 is warned about rather than failing the run, the
 * example runner writes only state its run has, and timestamps are UTC.
 */
describe("runner protocol conformance", () => {
  it("ctx.config carries the default of a required config_schema field the agent left out", async () => {
    // The agent was accepted without `mode` because the field has a default (missingConfigFields).
    const ev = await host.postEvent(messageEvent("conform-config", "hello"));
    expect((await host.waitForRun(ev.body.run_id!)).status).toBe("completed");
    const call = runner.calls.find((c) => c.body.context.run_id === ev.body.run_id)!;
    expect(call.body.context.config).toEqual({ mode: "fast" });
  });

  it("a required field whose schema default is null still has to be given", async () => {
    const agent = { agent_id: "conform-keyed", name: "keyed", runner_id: runner.runnerId("keyed"), event_types: ["message.received"], scope: { type: "conversation", id: "conform-keyed" } };
    const refused = await host.admin("POST", "/v1/admin/agents", { ...agent, runner_config: { api_key: null } });
    expect([refused.status, refused.body.error.details?.missing]).toEqual([400, ["api_key"]]);
    expect((await host.admin("POST", "/v1/admin/agents", { ...agent, runner_config: { api_key: "k-0123456789" } })).status).toBe(201);
  });

  it("ctx.config keeps what the agent set over the schema's default", async () => {
    await putAgent(host, { agent_id: "conform-set", runner_id: runner.runnerId(), scope: { type: "conversation", id: "conform-set" }, runner_config: { mode: "slow" } });
    const ev = await host.postEvent(messageEvent("conform-set", "hello"));
    expect((await host.waitForRun(ev.body.run_id!)).status).toBe("completed");
    expect(runner.calls.find((c) => c.body.context.run_id === ev.body.run_id)!.body.context.config).toEqual({ mode: "slow" });
  });

  it("tool.call.* telemetry is loose: an unusual payload is kept, not dropped and audited as runner.result_dropped", async () => {
    const ev = await host.postEvent(messageEvent("conform-tools", "tool-telemetry"));
    expect((await host.waitForRun(ev.body.run_id!)).status).toBe("completed");
    const ledger = await host.admin("GET", `/v1/runs/${ev.body.run_id}/events?limit=100`);
    const warnings = ledger.body.items.filter((e: any) => e.type === "host.warning").map((e: any) => e.data.message);
    const audits = await host.query<{ data_json: string }>("SELECT * FROM event_log WHERE run_id = ? AND event_type = 'runner.result_dropped'", [ev.body.run_id!]);
    expect({ warnings, audits: audits.length }).toEqual({ warnings: [], audits: 0 });
    // Kept in the ledger as the runner sent them.
    const telemetry = ledger.body.items.filter((e: any) => e.type.startsWith("tool.call."));
    expect(telemetry.map((e: any) => [e.type, e.data.tool_call_id ?? null])).toEqual([["tool.call.started", 7], ["tool.call.completed", null]]);
  });

  it("action.requested is recorded as sent and never acted on; an invalid one is dropped and audited, and the run goes on", async () => {
    const ev = await host.postEvent(messageEvent("conform-actions", "actions"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect([run.status, run.message?.content]).toEqual(["completed", "asked"]);
    const ledger = (await host.admin("GET", `/v1/runs/${ev.body.run_id}/events?limit=100`)).body.items as { seq: number; type: string; data: any }[];
    const [valid, invalid] = ledger.filter((e) => e.type === "action.requested");
    expect([valid.data, invalid.data]).toEqual([
      { action: "send_email", target: { to: "ops@example.com" }, payload: { subject: "hi" } },
      { action: "send_email", target: "ops@example.com" },
    ]);
    // Only the invalid one is named by a warning and an audit: the valid one was taken, and nothing more is recorded of it.
    const warned = ledger.filter((e) => e.type === "host.warning").map((e) => [e.data.code, e.data.ledger_seq]);
    expect(warned).toEqual([["result.invalid_payload", invalid.seq]]);
    const records = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type != 'message.received'", [ev.body.run_id!]);
    expect(records.map((r) => [r.event_type, JSON.parse(r.data_json).ledger_seq])).toEqual([["runner.result_dropped", invalid.seq]]);
  });

  it("a result numbered from 0 is warned about, not a reason to fail the whole run", async () => {
    const ev = await host.postEvent(messageEvent("conform-seq0", "seq-from-zero"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect([run.status, run.error?.code, run.message?.content]).toEqual(["completed", undefined, "zero"]);
    const ledger = await host.admin("GET", `/v1/runs/${ev.body.run_id}/events?limit=100`);
    expect(ledger.body.items.filter((e: any) => e.type === "host.warning").map((e: any) => e.data.code)).toEqual(["result.invalid_sequence"]);
  });

  it("the example runner sends no state.updated the run cannot apply (stateless agent): no runner.result_dropped per turn", async () => {
    const ev = await host.postEvent(messageEvent("conform-stateless", "hi"));
    expect((await host.waitForRun(ev.body.run_id!)).status).toBe("completed");
    const audits = await host.query("SELECT * FROM event_log WHERE run_id = ? AND event_type = 'runner.result_dropped'", [ev.body.run_id!]);
    expect(audits).toEqual([]);
  });

  it("a client's event_time with an offset reaches the runner as the host's UTC timestamp (Date#toISOString)", async () => {
    const ev = await host.postEvent(messageEvent("conform-offset", "hello", { event_time: "2026-01-01T10:00:00+02:00" }));
    await host.waitForRun(ev.body.run_id!);
    const ctx = runner.calls.find((c) => c.body.context.run_id === ev.body.run_id)!.body.context;
    expect(ctx.event.event_time).toBe("2026-01-01T08:00:00.000Z");
  });
});
