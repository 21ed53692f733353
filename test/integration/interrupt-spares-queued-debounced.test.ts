import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "A busy conversation", `interrupt`: "the active run ends cancelled, and so does a run answered `started`
 * that had not begun yet; then the new one starts, ahead of runs still waiting their turn". This session made an
 * interrupt supersede every run that would be due at any time (startable at Infinity), to catch a run answered
 * `started` in its debounce window. That also catches a run answered `queued` (it waited behind another run) whose
 * predecessor has since ended while it still waits out its debounce: it was told `queued`, it waits its turn, and
 * must run after the interrupting one, not be cancelled.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const seen: string[] = [];
const releaseFirst = deferred();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "int-queued-deb",
    async onRun({ body }, res) {
      const text = body.context.input.text;
      seen.push(text);
      const w = resultWriter(res, body.context.run_id);
      if (text === "first") await releaseFirst.promise;
      w.reply(`echo: ${text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  releaseFirst.resolve();
  await host?.dispose();
  await runner?.close();
});

const agent = (concurrency: Record<string, unknown>) => ({
  agent_id: "agent-int-qd",
  name: "int-qd",
  runner_id: runner.runnerId(),
  event_types: ["message.received"],
  scope: { type: "conversation", id: "int-qd" },
  concurrency,
});

describe("an interrupt while a run answered queued waits out its debounce", () => {
  it("leaves that run to wait its turn: it runs after the interrupting one", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent({ strategy: "enqueue" }))).status).toBe(201);
    const first = await host.postEvent(messageEvent("int-qd", "first"));
    expect(first.body.disposition).toBe("started");
    for (const until = Date.now() + 10_000; !seen.includes("first") && Date.now() < until; ) await new Promise((r) => setTimeout(r, 10));

    expect((await host.admin("PUT", "/v1/admin/agents/agent-int-qd", agent({ strategy: "enqueue", debounce_ms: 4000 }))).status).toBe(200);
    const second = await host.postEvent(messageEvent("int-qd", "second"));
    expect(second.body.disposition).toBe("queued");

    releaseFirst.resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");

    // "second" still waits out its debounce (4 s from its arrival) when the interrupting message comes.
    expect((await host.admin("PUT", "/v1/admin/agents/agent-int-qd", agent({ strategy: "interrupt" }))).status).toBe(200);
    const third = await host.postEvent(messageEvent("int-qd", "third"));
    expect(third.body.disposition).toBe("started");
    expect((await host.waitForRun(third.body.run_id!)).status).toBe("completed");
    const secondRun = await host.waitForRun(second.body.run_id!, 15_000);
    expect({ second: secondRun.status, seen }).toEqual({ second: "completed", seen: ["first", "third", "second"] });
  });
});
