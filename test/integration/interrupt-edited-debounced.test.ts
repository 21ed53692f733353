import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "A busy conversation", strategy `interrupt`: "the active run ends cancelled, and so does a run answered
 * `started` that had not begun yet; then the new one starts". A run in its debounce window, first in line, is
 * answered `started`. When the operator switches the agent to `interrupt` while it waits and a newer message
 * arrives, that run must end cancelled: it must not run after the interrupting one and answer the stale message.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const seen: string[] = [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "interrupt-debounced",
    async onRun({ body }, res) {
      seen.push(body.context.input.text);
      resultWriter(res, body.context.run_id).reply(`echo: ${body.context.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const agent = (concurrency: Record<string, unknown>) => ({
  agent_id: "agent-int-deb",
  name: "int-deb",
  runner_id: runner.runnerId(),
  event_types: ["message.received"],
  scope: { type: "conversation", id: "int-deb" },
  concurrency,
});

describe("an agent switched to interrupt while its run waits out its debounce", () => {
  it("cancels the run answered started that had not begun, and runs only the newer message", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent({ strategy: "enqueue", debounce_ms: 1500 }))).status).toBe(201);
    const first = await host.postEvent(messageEvent("int-deb", "first"));
    expect(first.body.disposition).toBe("started");
    expect((await host.admin("PUT", "/v1/admin/agents/agent-int-deb", agent({ strategy: "interrupt" }))).status).toBe(200);
    const second = await host.postEvent(messageEvent("int-deb", "second"));
    expect(second.body.disposition).toBe("started");
    expect((await host.waitForRun(second.body.run_id!)).status).toBe("completed");
    const firstRun = await host.waitForRun(first.body.run_id!);
    expect({ status: firstRun.status, seen }).toEqual({ status: "cancelled", seen: ["second"] });
  });
});
