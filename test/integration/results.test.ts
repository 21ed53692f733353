import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex");

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
      // Second turn: what the host kept from the first.
      const page = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", { limit: 10, include_artifacts: true });
      w.reply(JSON.stringify({ state: ctx.state, items: page.body.data.items }));
    },
  });
  host = await startTestHost();
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
});
