import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * What a runner sends is kept as it was sent or refused, never stored altered
 * (README): an inline `artifact.created` whose name, mime_type or
 * artifact_type an upload would refuse is dropped and audited as
 * `runner.result_dropped`, and so is a message whose text element holds a NUL
 * (the transcript would read it back cut short). The same artifact announced
 * twice before a message is attached to it once.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const BYTES = Buffer.from("hello").toString("base64");
const LABELS: Record<string, Record<string, unknown>> = {
  nul_name: { artifact_type: "file", mime_type: "text/plain", name: "report\u0000.txt" },
  newline_name: { artifact_type: "file", mime_type: "text/plain", name: "a\r\nb.txt" },
  not_a_media_type: { artifact_type: "file", mime_type: "definitely not a media type", name: "a.txt" },
  long_artifact_type: { artifact_type: "t".repeat(5000), mime_type: "text/plain", name: "a.txt" },
};

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "as-sent",
    runners: [{ name: "default", label: { en_US: "as-sent" }, capabilities: {}, permissions: { history: ["page"], artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const text: string = ctx.input.text;
      const history = () => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", { limit: 10, include_artifacts: true });
      if (LABELS[text]) {
        w.send("artifact.created", { ...LABELS[text], content_base64: BYTES });
        return w.reply("here is a file");
      }
      if (text === "nul") return w.reply([{ type: "text", text: "Total: 10\u0000 EUR, due Friday" }]);
      if (text === "twice") {
        const up = await uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, Buffer.from("report"), { name: "r.txt", mime_type: "text/plain", artifact_type: "file" });
        w.send("artifact.created", { artifact_type: "file", artifact_id: up.body.data.artifact_id });
        w.send("artifact.created", { artifact_type: "file", artifact_id: up.body.data.artifact_id });
        return w.reply("your report");
      }
      // What the history holds of the turns before.
      const items = (await history()).body.data.items.filter((i: any) => i.role === "assistant");
      w.reply(JSON.stringify(items.map((i: any) => ({ content: i.content, files: i.artifact_refs.map((r: any) => r.name) }))));
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "as-sent" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const dropped = (runId: string) => host.query("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [runId]);
const historyOf = async (conversation: string) =>
  JSON.parse(String((await host.waitForRun((await host.postEvent(messageEvent(conversation, "history?"))).body.run_id!)).message?.content));

describe("an inline artifact.created with a name, mime_type or artifact_type an upload would refuse", () => {
  for (const name of Object.keys(LABELS)) {
    it(`${name}: is dropped and audited, not stored`, async () => {
      const ev = await host.postEvent(messageEvent(`as-sent-${name}`, name));
      expect((await host.waitForRun(ev.body.run_id!)).status).toBe("completed");
      const stored = await host.query("SELECT name FROM artifact WHERE run_id = ?", [ev.body.run_id!]);
      expect({ dropped: (await dropped(ev.body.run_id!)).length, stored }).toEqual({ dropped: 1, stored: [] });
      expect(await historyOf(`as-sent-${name}`)).toEqual([{ content: "here is a file", files: [] }]);
    });
  }
});

describe("a message.completed whose text element holds a NUL", () => {
  it("is dropped and audited, never stored cut short", async () => {
    const ev = await host.postEvent(messageEvent("as-sent-nul", "nul"));
    const run = await host.waitForRun(ev.body.run_id!);
    // Its only message refused, the run has no output.
    expect({ status: run.status, dropped: (await dropped(ev.body.run_id!)).length }).toEqual({ status: "failed", dropped: 1 });
    expect(await historyOf("as-sent-nul")).toEqual([]);
  });
});

describe("the same artifact announced twice", () => {
  it("is attached once to the assistant's transcript item", async () => {
    const ev = await host.postEvent(messageEvent("as-sent-twice", "twice"));
    expect((await host.waitForRun(ev.body.run_id!)).status).toBe("completed");
    expect(await historyOf("as-sent-twice")).toEqual([{ content: "your report", files: ["r.txt"] }]);
  });
});
