import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * A runner's text is given back as it was sent, or refused, never stored altered: bytes that are not UTF-8 make a
 * line that is no JSON text (the run fails, runner.protocol_error), and an unpaired surrogate (a JSON `\ud800`),
 * which no UTF-8 store can keep, makes the result invalid (dropped and audited, PROTOCOL §7).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "text-fidelity",
    async onRun({ body }, res) {
      const ctx = body.context;
      const line = (type: string, data: unknown, sequence: number) => JSON.stringify({ run_id: ctx.run_id, type, data, sequence });
      const done = `${line("run.completed", { finish_reason: "stop" }, 3)}\n`;
      const message = (content: string, sequence: number) => line("message.completed", { message: { role: "assistant", content } }, sequence);
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      if (ctx.input.text === "invalid-utf8") {
        // "AB" with the bytes FF FE (never valid in UTF-8) between A and B.
        const json = Buffer.from(message("AB", 1));
        const at = json.indexOf("AB") + 1;
        return void res.end(Buffer.concat([json.subarray(0, at), Buffer.from([0xff, 0xfe]), json.subarray(at), Buffer.from(`\n${done}`)]));
      }
      // A valid JSON escape for an unpaired surrogate, then a message that is fine.
      return void res.end(`${message("xQy", 1).replace("xQy", "x\\ud800y")}\n${message("x\u{1F600}y", 2)}\n${done}`);
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "text-fidelity" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function answered(mode: string) {
  const ev = await host.postEvent(messageEvent(`fidelity-${mode}`, mode));
  const run = await host.waitForRun(ev.body.run_id!);
  const items = await host.query<{ content: string }>("SELECT content FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [ev.body.run_id!]);
  const dropped = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'runner.result_dropped'", [ev.body.run_id!]);
  return { run, texts: items.map((i) => i.content), dropped: dropped.map((d) => JSON.parse(d.data_json).reason as string) };
}

describe("a runner's message text is never stored altered", () => {
  it("a result line with bytes that are not UTF-8 fails the run (runner.protocol_error); nothing of it is stored", async () => {
    const { run, texts } = await answered("invalid-utf8");
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.protocol_error"]);
    expect(run.error?.message).toMatch(/not valid UTF-8/);
    expect(texts).toEqual([]);
  });

  it("a message whose text holds an unpaired surrogate is dropped and audited; a well-formed pair is kept as sent", async () => {
    const { run, texts, dropped } = await answered("lone-surrogate");
    expect(run.status).toBe("completed");
    expect(texts).toEqual(["x\u{1F600}y"]);
    expect(dropped).toEqual([expect.stringMatching(/unpaired surrogates/)]);
  });
});
