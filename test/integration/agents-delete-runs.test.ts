import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "What a DELETE leaves": deleting an agent cancels its runs not ended, through their conversations' objects
 * as `POST /v1/runs/{id}/cancel` does (the running one aborted, the queued ones ended at once), and its answer says
 * how many; `?runs=leave` leaves them as they are. Only the runs of the agent as created: never those of another
 * agent created later under its id, nor another agent's.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** `hold <key>` waits for its gate; the host breaking its request off is noted. */
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const gate = (key: string) => gates.get(key) ?? gates.set(key, deferred<void>()).get(key)!;
const brokenOff: string[] = [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "deletable",
    async onRun({ body }, res: ServerResponse) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const text = String(ctx.input.text);
      if (text.startsWith("hold ")) {
        res.on("close", () => res.writableEnded || brokenOff.push(ctx.run_id));
        await gate(text.slice("hold ".length)).promise;
        if (res.destroyed) return;
      }
      w.reply(`answered ${text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  await host?.dispose();
  await runner?.close();
});

const agentBody = (agentId: string, conversation: string) => ({ agent_id: agentId, name: agentId, runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: conversation } });
const reachedRunner = (runId: string) => waitFor(() => runner.calls.some((c) => c.body.context.run_id === runId), 10_000, `run ${runId} at its runner`);

/** An agent on its own conversation with one run held at the runner and one queued behind it. */
async function busyAgent(agentId: string, conversation = agentId) {
  expect((await host.admin("POST", "/v1/admin/agents", agentBody(agentId, conversation))).status).toBe(201);
  const held = await host.postEvent(messageEvent(conversation, `hold ${agentId}`));
  const queued = await host.postEvent(messageEvent(conversation, "second"));
  expect([held.body.disposition, queued.body.disposition]).toEqual(["started", "queued"]);
  await reachedRunner(held.body.run_id!);
  return { held: held.body.run_id!, queued: queued.body.run_id! };
}

describe("DELETE /v1/admin/agents/{id} with runs in flight", () => {
  it("cancels the agent's running and queued runs, says how many, and leaves another agent's run going", async () => {
    const doomed = await busyAgent("del-doomed");
    const bystander = await busyAgent("del-bystander");
    const del = await host.admin("DELETE", "/v1/admin/agents/del-doomed");
    expect({ status: del.status, body: del.body }).toEqual({ status: 200, body: { agent_id: "del-doomed", deleted: true, runs: { cancelled: 1, cancelling: 1, left: 0 } } });
    const [held, queued] = [await host.waitForRun(doomed.held), await host.waitForRun(doomed.queued)];
    expect([held.status, held.error]).toEqual(["cancelled", { code: "cancelled", message: "run cancelled by an operator: its agent was deleted" }]);
    expect([queued.status, queued.error]).toEqual(["cancelled", { code: "cancelled", message: "run cancelled before it started: its agent was deleted" }]);
    // The runner's request was broken off; the queued run never reached it.
    await waitFor(() => brokenOff.includes(doomed.held), 5_000, "the held request broken off");
    expect(runner.calls.some((c) => c.body.context.run_id === doomed.queued)).toBe(false);
    // Another agent's runs are not touched.
    expect((await host.admin("GET", `/v1/runs/${bystander.held}`)).body.status).toBe("running");
    gate("del-bystander").resolve();
    expect((await host.waitForRun(bystander.held)).status).toBe("completed");
    expect((await host.waitForRun(bystander.queued)).message?.content).toBe("answered second");
  });

  it("?runs=leave counts them and leaves them: the running one answers, the queued one fails host.agent_unavailable at its turn", async () => {
    const left = await busyAgent("del-leave");
    const del = await host.admin("DELETE", "/v1/admin/agents/del-leave?runs=leave");
    expect({ status: del.status, body: del.body }).toEqual({ status: 200, body: { agent_id: "del-leave", deleted: true, runs: { cancelled: 0, cancelling: 0, left: 2 } } });
    gate("del-leave").resolve();
    expect((await host.waitForRun(left.held)).message?.content).toBe("answered hold del-leave");
    expect((await host.waitForRun(left.queued)).error?.code).toBe("host.agent_unavailable");
  });

  it("cancels only the runs of the agent as created: not those of an agent deleted earlier under the same id", async () => {
    const old = await busyAgent("del-reused", "del-reused-old");
    expect((await host.admin("DELETE", "/v1/admin/agents/del-reused?runs=leave")).body.runs).toEqual({ cancelled: 0, cancelling: 0, left: 2 });
    // Created again under the id, on another conversation: its own run is held there.
    expect((await host.admin("POST", "/v1/admin/agents", agentBody("del-reused", "del-reused-new"))).status).toBe(201);
    const fresh = await host.postEvent(messageEvent("del-reused-new", "hold del-reused-new"));
    await reachedRunner(fresh.body.run_id!);
    expect((await host.admin("DELETE", "/v1/admin/agents/del-reused")).body.runs).toEqual({ cancelled: 0, cancelling: 1, left: 0 });
    expect((await host.waitForRun(fresh.body.run_id!)).status).toBe("cancelled");
    // The first agent's run was left going, and still answers.
    expect((await host.admin("GET", `/v1/runs/${old.held}`)).body.status).toBe("running");
    gate("del-reused").resolve();
    expect((await host.waitForRun(old.held)).status).toBe("completed");
  });

  it("refuses an unknown runs value without deleting anything", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agentBody("del-typo", "del-typo"))).status).toBe(201);
    const del = await host.admin("DELETE", "/v1/admin/agents/del-typo?runs=finish");
    expect([del.status, del.body.error?.code]).toEqual([400, "invalid_request"]);
    expect((await host.admin("GET", "/v1/admin/agents/del-typo")).status).toBe(200);
  });
});
