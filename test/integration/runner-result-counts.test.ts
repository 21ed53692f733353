import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { runLedger } from "../support/scripted-runner";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A run accepts at most RUN_MAX_MESSAGES `message.completed` and RUN_MAX_STATE_UPDATES `state.updated` results
 * (README, Writing a runner): a runner looping on either fails its own run (`runner.too_many_messages`,
 * `runner.too_many_state_updates`) at the first one past the cap, instead of writing a transcript item or a state row
 * per line up to the stream's byte limit. What came before is kept; the conversation and other runs are untouched.
 */
const CAP = 3;
const SENT = 6;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "result-counts",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const mode = String(ctx.input.text);
      if (mode === "messages" || mode === "at-cap") {
        const count = mode === "messages" ? SENT : CAP;
        for (let i = 1; i <= count; i++) w.send("message.completed", { message: { role: "assistant", content: `m${i}` } });
        w.send("run.completed", { finish_reason: "stop" });
        return void res.end();
      }
      if (mode === "state") {
        // Writes to one key count as writes to many: each is a write all the same.
        w.send("message.completed", { message: { role: "assistant", content: "saving" } });
        for (let i = 1; i <= SENT; i++) w.send("state.updated", { scope: "conversation", key: `k${i % 2 ? i : 1}`, value: i });
        return w.reply("saved");
      }
      w.reply(`echo: ${mode}`);
    },
  });
  host = await startTestHost({ vars: { RUN_MAX_MESSAGES: String(CAP), RUN_MAX_STATE_UPDATES: String(CAP) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "result-counts" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function runIn(conv: string, text: string) {
  const posted = await host.postEvent(messageEvent(conv, text));
  const run = await host.waitForRun(posted.body.run_id!);
  const items = await host.query<{ role: string; content: string }>("SELECT role, content FROM transcript WHERE conversation_id = ? ORDER BY seq", [conv]);
  const ledger = (await runLedger(host, run.run_id)) as { type: string; origin: string; data: any }[];
  return { run, items, ledger, eventId: posted.body.event_id };
}

describe("RUN_MAX_MESSAGES and RUN_MAX_STATE_UPDATES", () => {
  it("fails a run at its first message.completed past the cap, keeping the messages before it; one at the cap completes", async () => {
    const atCap = await runIn("counts-at-cap", "at-cap");
    expect(atCap.run.status).toBe("completed");
    expect(atCap.items.filter((i) => i.role === "assistant").map((i) => i.content)).toEqual(["m1", "m2", "m3"]);

    const { run, items, ledger } = await runIn("counts-messages", "messages");
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "runner.too_many_messages" });
    expect(run.error?.message).toContain(`more than ${CAP} messages (RUN_MAX_MESSAGES)`);
    // The user's message and the first CAP answers; nothing of the rest.
    expect(items).toEqual([{ role: "user", content: "messages" }, ...[1, 2, 3].map((i) => ({ role: "assistant", content: `m${i}` }))]);
    // Reading stopped at the one past the cap: it is in the ledger as sent, then the host's run.failed; nothing after it.
    const fromRunner = ledger.filter((e) => e.origin === "runner").map((e) => e.data.message?.content);
    expect(fromRunner).toEqual(["m1", "m2", "m3", "m4"]);
    expect(ledger.at(-1)).toMatchObject({ type: "run.failed", origin: "host", data: { code: "runner.too_many_messages" } });
    const [failed] = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [run.run_id]);
    expect(JSON.parse(failed.data_json)).toMatchObject({ code: "runner.too_many_messages" });
  });

  it("fails a run at its first state.updated past the cap, keeping the writes and the message before it", async () => {
    const { run, items } = await runIn("counts-state", "state");
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "runner.too_many_state_updates" });
    expect(run.error?.message).toContain(`more than ${CAP} state writes (RUN_MAX_STATE_UPDATES, state.updated results and state.set calls together)`);
    expect(items).toEqual([{ role: "user", content: "state" }, { role: "assistant", content: "saving" }]);
    // Writes 1-3 applied (k1 = 2 overwritten by the second, k3 = 3); the fourth (k1 = 4) and later are not.
    const rows = await host.query<{ key: string; value_json: string }>("SELECT key, value_json FROM runner_state WHERE runner_id = ? AND scope = 'conversation' AND key LIKE 'k%' ORDER BY key", [runner.runnerId()]);
    expect(rows).toEqual([{ key: "k1", value_json: "2" }, { key: "k3", value_json: "3" }]);
  });

  it("leaves the conversation to the next run, and other conversations untouched", async () => {
    await runIn("counts-after", "messages");
    const next = await runIn("counts-after", "hello again");
    expect(next.run.status).toBe("completed");
    expect(next.items.map((i) => i.content)).toEqual(["messages", "m1", "m2", "m3", "hello again", "echo: hello again"]);
    const other = await runIn("counts-other", "hi");
    expect(other.run.status).toBe("completed");
  });
});
