import { describe, expect, it } from "vitest";
import { messageEvent } from "../support/host";
import { useWelcomeBusy } from "../support/welcome-busy";

/**
 * README "Bursts (concurrency.debounce_ms): a run's start is delayed; with a
 * steering runner, the messages of the window are claimed by that run and wait
 * in its queue when it begins, so one run answers the burst." A burst that
 * arrives while the conversation is busy with another agent's run (a join
 * handled by a welcome agent) should still be answered by one run.
 */
const pulled: string[] = [];
const busy = useWelcomeBusy({
  name: "debounce-busy",
  conversation: "busy-burst",
  permissions: { history: ["page"] },
  concurrency: { strategy: "steer", debounce_ms: 1500 },
  onMessage: async (_text, pullAll) => void pulled.push(...(await pullAll())),
});
const { releaseWelcome, memberJoins } = busy;

describe("a debounced burst while another agent's run is active", () => {
  it("is claimed by the burst's first run, so one run answers it", async () => {
    const join = await memberJoins();
    expect(join.body.disposition).toBe("started");
    const m1 = await busy.host.postEvent(messageEvent("busy-burst", "m1"));
    const m2 = await busy.host.postEvent(messageEvent("busy-burst", "m2"));
    const m3 = await busy.host.postEvent(messageEvent("busy-burst", "m3"));
    setTimeout(() => releaseWelcome.resolve(), 300);
    const dispositions = [m1, m2, m3].map((m) => m.body.disposition);
    const runIds = new Set([m1, m2, m3].map((m) => m.body.run_id));
    for (const id of runIds) await busy.host.waitForRun(id!);
    expect({ dispositions, runs: runIds.size, pulled }).toEqual({ dispositions: ["queued", "steered", "steered"], runs: 1, pulled: ["m2", "m3"] });
  });
});
