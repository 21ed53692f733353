import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A run an operator is cancelling is no longer "active" (PROTOCOL §10): a
 * message that arrives once its cancellation is under way must not be claimed
 * by it (it would only be dropped, and the message never answered).
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let steerer: Runner;

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "steerer",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const items = (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull")).body.data?.items ?? [];
      w.reply(JSON.stringify({ text: ctx.input.text, pulled: items.length }));
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await steerer?.close();
});

describe("steering and operator cancel", () => {
  it("a message arriving while the run is being cancelled is not absorbed into it", async () => {
    const lost: string[] = [];
    for (let i = 0; i < 25; i++) {
      const c = `cancel-claim-${i}`;
      await putAgent(host, { agent_id: `agent-${c}`, runner_id: steerer.runnerId(), scope: { type: "conversation", id: c }, concurrency: { debounce_ms: 3000 } });
      const first = await host.postEvent(messageEvent(c, "first"));
      expect(first.body.disposition).toBe("started");
      const cancel = host.admin("POST", `/v1/runs/${first.body.run_id}/cancel`);
      await new Promise((r) => setTimeout(r, i % 5));
      const second = await host.postEvent(messageEvent(c, "second", { event_id: `${c}-2` }));
      expect((await cancel).status).toBe(202);
      if (second.body.disposition !== "steered") continue;
      const run = (await host.admin("GET", `/v1/runs/${first.body.run_id}`)).body;
      const ev = (await host.admin("GET", `/v1/events/${c}-2`)).body;
      const claimedAt = Date.parse(ev.metadata?.steering?.claimed_at ?? "");
      // Claimed strictly after the cancel had begun to end the run.
      if (run.status === "cancelled" && claimedAt > Date.parse(run.ended_at)) {
        const dropped = await host.query("SELECT 1 FROM event_log WHERE event_type = 'steering.dropped' AND json_extract(data_json, '$.source_event_id') = ?", [`${c}-2`]);
        lost.push(`${c}: claimed ${ev.metadata.steering.claimed_at}, run cancelled at ${run.ended_at}, dropped=${dropped.length}`);
      }
    }
    expect(lost).toEqual([]);
  });
});
