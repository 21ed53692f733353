import { afterAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { messageEvent } from "../support/host";
import { useWelcomeBusy } from "../support/welcome-busy";

/**
 * A steering agent's messages that queue behind another agent's run (a join handled by a welcome agent) are
 * handled in the order the conversation received them: a message sent once the first one's run has begun is not
 * handled before the message sent before it, which waits in a run of its own.
 */
const releaseChat = deferred();
const handled: string[] = [];
const busy = useWelcomeBusy({
  name: "order-busy",
  conversation: "order-busy",
  permissions: {},
  concurrency: { strategy: "steer" },
  async onMessage(text, pullAll) {
    handled.push(text);
    await releaseChat.promise;
    handled.push(...(await pullAll()));
  },
});
const { releaseWelcome, memberJoins } = busy;
// Registered after useWelcomeBusy's: runs before it disposes the host.
afterAll(() => releaseChat.resolve());

describe("steer behind another agent's run", () => {
  it("m1 and m2 wait behind the welcome run; m3, sent once m1's run has begun, is handled after m2", async () => {
    const join = await memberJoins();
    expect(join.body.disposition).toBe("started");
    const m1 = await busy.host.postEvent(messageEvent("order-busy", "m1"));
    const m2 = await busy.host.postEvent(messageEvent("order-busy", "m2"));
    releaseWelcome.resolve();
    await waitFor(() => handled.includes("m1"), 10_000, "m1's run to begin");
    const m3 = await busy.host.postEvent(messageEvent("order-busy", "m3"));
    releaseChat.resolve();
    for (const m of [m1, m2, m3]) if (m.body.disposition !== "steered") await busy.host.waitForRun(m.body.run_id!);
    await waitFor(() => handled.length === 3, 10_000, "all three handled");
    expect({ dispositions: [m1, m2, m3].map((m) => m.body.disposition), handled }).toMatchObject({ handled: ["m1", "m2", "m3"] });
  });
});
