import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README `POST /v1/events`: a `duplicate` whose first run "never reached its conversation" hands it over. That run
 * is bound to the agent that bound its event; README "Effective access": a run waiting to start runs with its agent as
 * it is then (re-scoped, say), and fails with host.agent_unavailable when that agent was disabled or deleted. Binding
 * resolution of the repeat must not decide whether the lost run is handed over (nor to whom): otherwise it stays
 * `created` until the cron ends it `host.not_handed_over`, ten minutes on, or is run by an agent that never bound it.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let first: Runner;
let second: Runner;

const behave = (name: string) =>
  async function ({ body }: { body: any }, res: import("node:http").ServerResponse) {
    resultWriter(res, body.context.run_id).reply(`${name}: ${body.context.input.text}`);
  };

beforeAll(async () => {
  first = await startAdHocRunner({ name: "redeliv-changed-first", onRun: behave("first") });
  second = await startAdHocRunner({ name: "redeliv-changed-second", onRun: behave("second") });
  host = await startTestHost();
  for (const r of [first, second]) expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await first?.close();
  await second?.close();
});

const agentBody = (conv: string, overrides: Record<string, unknown> = {}) => ({
  agent_id: `agent-${conv}`,
  name: conv,
  runner_id: first.runnerId(),
  event_types: ["message.received"],
  scope: { type: "conversation", id: conv },
  ...overrides,
});

/** A lost run of `conv` bound to its agent on the first runner, `change` applied, then the event sent again. */
async function repeatedAfter(conv: string, change: () => Promise<void>) {
  expect((await host.admin("POST", "/v1/admin/agents", agentBody(conv))).status).toBe(201);
  const lost = await unhandedRun(host, conv, `evt-${conv}`);
  await change();
  const again = await host.postEvent(messageEvent(conv, "first", { event_id: `evt-${conv}` }));
  expect(again.status).toBe(200);
  expect(again.body).toMatchObject({ disposition: "duplicate", run_id: lost });
  // Far sooner than the cron's ten minutes: the repeat handed it over.
  return { lost, run: await host.waitForRun(lost, 5_000) };
}

const put = async (conv: string, overrides: Record<string, unknown>) => expect((await host.admin("PUT", `/v1/admin/agents/agent-${conv}`, agentBody(conv, overrides))).status).toBe(200);
const del = async (conv: string) => expect((await host.admin("DELETE", `/v1/admin/agents/agent-${conv}?runs=leave`)).status).toBe(200);
const ranOn = (r: Runner, runId: string) => r.calls.some((c) => c.body.context.run_id === runId);

describe("a repeat handing over a lost run whose agent changed since", () => {
  it.each([
    ["disabled", (c: string) => put(c, { enabled: false }), "disabled"],
    ["deleted", (c: string) => del(c), "deleted"],
  ])("fails it with host.agent_unavailable at once when its agent was %s", async (what, change, word) => {
    const { lost, run } = await repeatedAfter(`rc-${what}`, () => change(`rc-${what}`));
    expect(run.status).toBe("failed");
    expect(run.error).toEqual({ code: "host.agent_unavailable", message: expect.stringContaining(word) });
    expect(ranOn(first, lost)).toBe(false);
    const [record] = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [lost]);
    expect(record.n).toBe(1);
  });

  it("fails it when its agent was deleted and created anew under its id elsewhere (no agent binds the repeat now)", async () => {
    const conv = "rc-recreated-elsewhere";
    const { lost, run } = await repeatedAfter(conv, async () => {
      await del(conv);
      expect((await host.admin("POST", "/v1/admin/agents", agentBody(conv, { runner_id: second.runnerId(), scope: { type: "conversation", id: "rc-elsewhere" } }))).status).toBe(201);
    });
    expect(run.error?.code).toBe("host.agent_unavailable");
    expect(ranOn(first, lost) || ranOn(second, lost)).toBe(false);
  });

  it("fails it when its agent was deleted and created anew under its id on another runner, binding the same conversation", async () => {
    const conv = "rc-recreated-here";
    const { lost, run } = await repeatedAfter(conv, async () => {
      await del(conv);
      expect((await host.admin("POST", "/v1/admin/agents", agentBody(conv, { runner_id: second.runnerId() }))).status).toBe(201);
    });
    expect(run.error?.code).toBe("host.agent_unavailable");
    expect(ranOn(second, lost)).toBe(false);
    // Its row agrees with its own run.failed record: the runner it was bound to, never the new agent's.
    const [record] = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [lost]);
    expect([run.runner_id, JSON.parse(record.data_json).runner_id]).toEqual([first.runnerId(), first.runnerId()]);
  });

  it("runs it under its agent only edited meanwhile (moved to another runner), as it would a queued run", async () => {
    const conv = "rc-moved";
    const { run } = await repeatedAfter(conv, () => put(conv, { runner_id: second.runnerId() }));
    expect([run.status, run.message?.content]).toEqual(["completed", "second: first"]);
  });

  it("never runs it under another agent that binds the conversation now: its own agent, disabled, fails it", async () => {
    const conv = "rc-disabled-other";
    const { lost, run } = await repeatedAfter(conv, async () => {
      await put(conv, { enabled: false });
      expect((await host.admin("POST", "/v1/admin/agents", agentBody(conv, { agent_id: "rc-other", runner_id: second.runnerId() }))).status).toBe(201);
    });
    expect(run.error?.code).toBe("host.agent_unavailable");
    expect(ranOn(second, lost)).toBe(false);
  });

  it("runs it under its agent re-scoped meanwhile, as a queued run would", async () => {
    const conv = "rc-rescoped";
    const { run } = await repeatedAfter(conv, () => put(conv, { scope: { type: "conversation", id: "rc-rescoped-elsewhere" } }));
    expect(run.status).toBe("completed");
    expect(run.message?.content).toBe("first: first");
  });

  it("runs it under its own agent when another agent binds the conversation now", async () => {
    const conv = "rc-rescoped-other";
    const { lost, run } = await repeatedAfter(conv, async () => {
      await put(conv, { scope: { type: "conversation", id: "rc-rescoped-other-elsewhere" } });
      expect((await host.admin("POST", "/v1/admin/agents", agentBody(conv, { agent_id: "rc-other-2", runner_id: second.runnerId() }))).status).toBe(201);
    });
    expect(run.status).toBe("completed");
    expect(run.message?.content).toBe("first: first");
    expect(run.agent_id).toBe(`agent-${conv}`);
    expect(ranOn(second, lost)).toBe(false);
  });
});
