import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A follower of a run not yet handed to its conversation waits for its end.
 * When the redelivery that hands it over decides the event otherwise (steered
 * into an active run), the run is discarded and will never start: the
 * follower's stream ends, saying so.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let steerer: Runner;
const hold = deferred<void>();
const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }];

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "follow-steerer",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.event?.input?.text === "hold" || JSON.stringify(body).includes('"hold"')) {
        await hold.promise;
        await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" }).catch(() => undefined);
      }
      w.reply("done");
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
});
afterAll(async () => {
  hold.resolve();
  await host?.dispose();
  await steerer?.close();
});

async function within<T>(ms: number, p: Promise<T>): Promise<T | "still open"> {
  return Promise.race([p, new Promise<"still open">((r) => setTimeout(() => r("still open"), ms))]);
}

describe("following an unhanded run that its redelivery steers elsewhere", () => {
  it("ends the follower's stream with `steered`", async () => {
    const c = "follow-steered";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: steerer.runnerId(), scope: { type: "conversation", id: c } });
    const lost = await unhandedRun(host, c, `${c}-1`, "quick");
    // An active run of the same agent that steers.
    const busy = await host.postEvent(messageEvent(c, "hold"));
    expect(busy.body.disposition).toBe("started");
    await new Promise((r) => setTimeout(r, 300));

    const controller = new AbortController();
    const res = await fetch(`${host.url}/v1/runs/${lost}/stream`, { headers: auth(), signal: controller.signal });
    expect(res.status).toBe(200);
    const followed = readSse(res).catch(() => ({ frames: [], end: "aborted" }));
    await new Promise((r) => setTimeout(r, 300));

    const again = await host.postEvent(messageEvent(c, "quick", { event_id: `${c}-1` }));
    // The redelivery was steered into the busy run, which the answer names: the lost run's row is gone, it will never start or end.
    expect(again.body).toMatchObject({ disposition: "duplicate", run_id: busy.body.run_id });
    expect((await host.admin("GET", `/v1/runs/${lost}`)).status).toBe(404);

    const outcome = await within(5_000, followed);
    controller.abort();
    hold.resolve();
    expect(outcome).toEqual({ frames: [], end: "steered" });
  });
});
