import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * The window between a runner's last result and its run's recorded end: a
 * cancel then has nothing to cancel (409 with how the run ended), and a new
 * message is not claimed by a run whose runner can no longer pull it.
 * "hold…" waits for the conversation's gate; "slow…" answers with a marker
 * the test can hold in the database.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let steerer: Runner;
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const started = new Map<string, string[]>();
const gate = (c: string) => {
  if (!gates.has(c)) gates.set(c, deferred());
  return gates.get(c)!;
};
const startedTexts = (c: string) => started.get(c) ?? [];
const SLOW_REPLY = "end-slow-final-reply-9c1e";

async function behave({ body }: { body: any }, res: import("node:http").ServerResponse) {
  const ctx = body.context;
  const w = resultWriter(res, ctx.run_id);
  const c: string = ctx.conversation.conversation_id;
  const text: string = ctx.input.text ?? "";
  started.set(c, [...startedTexts(c), text]);
  const api = (action: string, params: Record<string, unknown> = {}) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
  if (text.startsWith("hold")) await gate(c).promise;
  const pulled = ctx.config.pull === "all" ? await api("steering.pull").then((r) => r.body.data?.items ?? [], () => []) : [];
  if (text.startsWith("slow")) return w.reply(`${SLOW_REPLY} ${JSON.stringify(pulled.map((i: any) => i.input.text))}`);
  w.reply(JSON.stringify({ text, pulled: pulled.map((i: any) => i.input.text) }));
}

const manifest = [{ name: "default", label: { en_US: "end" }, capabilities: { streaming: true, steering: true } }];

beforeAll(async () => {
  steerer = await startAdHocRunner({ name: "end-steerer", runners: manifest, onRun: behave });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await steerer?.close();
});

function agentBody(c: string, runner: Runner, opts: { pull?: "all" | "never" } = {}) {
  return {
    agent_id: `agent-${c}`,
    name: c,
    runner_id: runner.runnerId(),
    runner_config: { pull: opts.pull ?? "never" },
    event_types: ["message.received"],
    scope: { type: "conversation", id: c },
  };
}

async function agentFor(c: string, runner: Runner, opts: Parameters<typeof agentBody>[2] = {}) {
  const res = await host.admin("POST", "/v1/admin/agents", agentBody(c, runner, opts));
  expect(res.status).toBe(201);
}


const statusOf = async (runId: string) => (await host.admin("GET", `/v1/runs/${runId}`)).body.status as string;

describe("cancel of a run that has already ended cancelled", () => {
  it("a second cancel, after the run's cancelled end is recorded, answers 409 with status cancelled (not 202 cancelling)", async () => {
    const c = "end-cancel-twice";
    await agentFor(c, steerer, { pull: "never" });
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the run to start");
    // A claimed message the run never pulls: its steering.dropped record is written after the run's end.
    expect((await host.postEvent(messageEvent(c, "extra"))).body.disposition).toBe("steered");
    host.databaseOutage({ delayMs: 2_000, matching: "steering.dropped" });

    expect((await host.admin("POST", `/v1/runs/${first.body.run_id}/cancel`)).status).toBe(202);
    await waitFor(async () => (await statusOf(first.body.run_id!)) === "cancelled", 10_000, "the cancelled end to be recorded");

    const again = await host.admin("POST", `/v1/runs/${first.body.run_id}/cancel`);
    expect({ status: again.status, run_status: again.body.status }).toEqual({ status: 409, run_status: "cancelled" });
    gate(c).resolve();
  });
});

describe("a message that arrives while a completed run's end is being recorded", () => {
  it("is not claimed by that run (its runner has finished and can never pull it): it gets a run of its own", async () => {
    const c = "end-steer-finished";
    await agentFor(c, steerer, { pull: "all" });
    // The finished run's last write (its reply and run.completed) takes a while, as one Turso round trip can.
    host.databaseOutage({ delayMs: 2_000, matching: SLOW_REPLY });
    const first = await host.postEvent(messageEvent(c, "slow first"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    await new Promise((r) => setTimeout(r, 500));

    const second = await host.postEvent(messageEvent(c, "second", { event_id: "end-steer-finished-2" }));
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const dropped = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.dropped' AND conversation_id = ?", [c]);
    expect({ disposition: second.body.disposition, dropped: Number(dropped[0].n), started: startedTexts(c) }).toEqual({ disposition: "queued", dropped: 0, started: ["slow first", "second"] });
  });
});
