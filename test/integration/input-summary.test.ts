import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * An EventLog record's `input_summary` (PROTOCOL §8 AgentEventRecord) is the
 * start of the user's text. Cut at 200 UTF-16 code units, it can split a
 * surrogate pair: the lone half cannot be stored and reads back as U+FFFD,
 * a character the user never wrote ("never stored altered", README).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "summary" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "summary", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("input_summary", () => {
  it("never ends in half a character (U+FFFD) when the cut falls inside an emoji", async () => {
    const text = `${"a".repeat(199)}😀 and more`;
    const posted = await host.postEvent(messageEvent("summary-emoji", text));
    await host.waitForRun(posted.body.run_id!);
    const ops = (await host.admin("GET", `/v1/events/${posted.body.event_id}`)).body;
    const viaRunner = (await runner.run(host, "summary-emoji", (api) => api("event.get", { event_id: posted.body.event_id }))).result.body.data;
    for (const summary of [ops.input_summary as string, viaRunner.input_summary as string]) {
      expect(summary).not.toContain("\uFFFD");
      expect(text.startsWith(summary)).toBe(true);
    }
  });
});
