import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner, putAgent } from "../support/scripted-runner";

/**
 * GET /v1/runs refuses an unknown filter with 400 (README) and every admin listing an unknown parameter;
 * so do the conversation reads and a run's ledger: a misspelt filter would otherwise answer another conversation.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "unknown-params" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "unknown-params", runner_id: runner.runnerId() });
  await host.waitForRun((await host.postEvent(messageEvent("up-conv", "in channel"))).body.run_id!);
  await host.waitForRun((await host.postEvent(messageEvent("up-conv", "in thread", { thread_id: "t1" }))).body.run_id!);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("operator conversation reads with a misspelt filter", () => {
  it("refuse the unknown parameter with 400, as GET /v1/runs does, instead of answering another conversation", async () => {
    expect((await host.admin("GET", "/v1/runs?conversation_id=up-conv&thread=t1")).status).toBe(400);
    const transcript = await host.admin("GET", "/v1/conversations/transcript?conversation_id=up-conv&thread=t1");
    const events = await host.admin("GET", "/v1/conversations/events?conversation_id=up-conv&threadid=t1");
    expect({ transcript: transcript.status, events: events.status, transcriptItems: transcript.body.items?.map((i: any) => i.content) }).toEqual({
      transcript: 400,
      events: 400,
      transcriptItems: undefined,
    });
  });

  it("the run ledger refuses a parameter it does not know (a follower's `after=`) instead of replaying from the start", async () => {
    const runId = (await host.admin("GET", "/v1/runs?conversation_id=up-conv&limit=1")).body.items[0].run_id;
    const page = await host.admin("GET", `/v1/runs/${runId}/events?after=2`);
    expect({ status: page.status, firstSeq: page.body.items?.[0]?.seq }).toEqual({ status: 400, firstSeq: undefined });
  });
});
