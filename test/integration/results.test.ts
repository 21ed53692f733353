import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex");
/** Longer than the default, so that a result held for it is plainly held. */
const WRITE_INTERVAL_MS = 1_000;
/** The run of the message a user sent while "answer, then work" went on. */
let followUpRunId: string | undefined;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "results",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "make") {
        w.send("artifact.created", { artifact_type: "image", mime_type: "image/png", name: "chart.png", content_base64: PNG.toString("base64") });
        w.send("state.updated", { scope: "conversation", key: "last", value: { made: "chart" } });
        w.send("state.updated", { scope: "actor", key: "seen", value: true });
        return w.reply("here is your chart");
      }
      if (ctx.input.text === "answer, then work") {
        // The delta is the run's first write, made at once; its answer comes well within RUN_WRITE_INTERVAL_MS of it.
        w.send("message.delta", { chunk: { role: "assistant", content: "first answer" } });
        await sleep(50);
        w.send("message.completed", { message: { role: "assistant", content: "first answer" } });
        // The user has read it (streamed) and says more while the runner goes on working: that message waits its turn.
        const written = () => host.query("SELECT 1 FROM transcript WHERE run_id = ? AND role = 'assistant'", [ctx.run_id]);
        for (let i = 0; i < 25 && !(await written()).length; i++) await sleep(20);
        const followUp = await host.postEvent(messageEvent(ctx.conversation.conversation_id, "what did you keep?"));
        expect(followUp.body.disposition).toBe("queued");
        followUpRunId = followUp.body.run_id!;
        await sleep(100);
        w.send("run.completed", { finish_reason: "stop" });
        return void res.end();
      }
      // Second turn: what the host kept from the first.
      const page = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", { limit: 10, include_artifacts: true });
      w.reply(JSON.stringify({ state: ctx.state, items: page.body.data.items }));
    },
  });
  host = await startTestHost({ vars: { RUN_WRITE_INTERVAL_MS: String(WRITE_INTERVAL_MS) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "results" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("result handling", () => {
  it("stores inline artifacts, attaches them to the assistant item, and applies state updates to the next run's snapshot", async () => {
    const first = await host.postEvent(messageEvent("results-1", "make"));
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const second = await host.postEvent(messageEvent("results-1", "what did you keep?"));
    const kept = JSON.parse(String((await host.waitForRun(second.body.run_id!)).message?.content));

    expect(kept.state.conversation).toEqual({ "external.conversation_id": "results-1", last: { made: "chart" } });
    expect(kept.state.actor).toEqual({ seen: true });
    const assistant = kept.items.find((i: any) => i.role === "assistant");
    expect(assistant.content).toBe("here is your chart");
    expect(assistant.artifact_refs).toHaveLength(1);
    expect(assistant.artifact_refs[0]).toMatchObject({ artifact_type: "image", mime_type: "image/png", name: "chart.png", size_bytes: PNG.length });
    expect(assistant.artifact_refs[0].artifact_id).toMatch(/^art_/);
    expect(Buffer.from((await host.r2Object(`artifacts/${assistant.artifact_refs[0].artifact_id}`))!)).toEqual(PNG);
    // Newest first, and the user item of this very turn is part of the conversation view.
    expect(kept.items.map((i: any) => i.role)).toEqual(["user", "assistant", "user"]);
  });

  it("stores an answer before a user message that arrives while its runner goes on working: a later run reads them in that order", async () => {
    const first = await host.postEvent(messageEvent("results-order", "answer, then work"));
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const kept = JSON.parse(String((await host.waitForRun(followUpRunId!)).message?.content));
    // Newest first: the answer came before the message that followed it, as the conversation received them.
    expect(kept.items.map((i: any) => [i.role, i.content])).toEqual([
      ["user", "what did you keep?"],
      ["assistant", "first answer"],
      ["user", "answer, then work"],
    ]);
  });
});
