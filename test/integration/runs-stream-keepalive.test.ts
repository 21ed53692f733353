import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A run can be quiet for a long time (its runner calling tools). Its SSE
 * stream then sends a comment every RUN_STREAM_KEEPALIVE_MS, which EventSource
 * ignores and which keeps proxies that close idle connections from closing it.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const KEEPALIVE_MS = 150;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "keepalive" });
  host = await startTestHost({ vars: { RUN_STREAM_KEEPALIVE_MS: String(KEEPALIVE_MS) } });
  await runner.register(host);
  await putAgent(host, { agent_id: "keepalive", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** Reads a stream's text until `until` holds for what has arrived so far, or the stream ends. */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, until: (text: string) => boolean, text = "") {
  const decoder = new TextDecoder();
  while (!until(text)) {
    const r = await reader.read();
    if (r.done) break;
    text += decoder.decode(r.value, { stream: true });
  }
  return text;
}
const keepAlives = (text: string) => text.match(/^: keep-alive$/gm)?.length ?? 0;

describe("a quiet run's stream", () => {
  it("sends keep-alive comments while nothing happens, then its frames and end as usual", async () => {
    const quiet = deferred();
    const release = deferred();
    const done = runner.run(host, "keepalive-quiet", async (_api, _ctx, emit) => {
      emit("custom.progress", { step: 1 });
      quiet.resolve();
      await release.promise;
      return "done";
    });
    await quiet.promise;
    const [run] = (await host.admin("GET", "/v1/runs?conversation_id=keepalive-quiet&limit=1")).body.items;
    const res = await fetch(`${host.url}/v1/runs/${run.run_id}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    const reader = res.body!.getReader();

    const quietText = await readUntil(reader, (t) => keepAlives(t) >= 3);
    release.resolve();
    const text = await readUntil(reader, () => false, quietText);
    await done;

    expect(keepAlives(quietText)).toBe(3);
    // The comments are blocks of their own: every other block is a frame with its id, the end last.
    const blocks = text.split("\n\n").filter((b) => b && b !== ": keep-alive");
    expect(blocks.map((b) => /^event: (\w+)$/m.exec(b)?.[1])).toEqual(["result", "result", "result", "result", "end"]);
    // (the host warns that custom.progress is a type it does not know)
    expect(blocks.slice(0, 4).map((b) => JSON.parse(/^data: (.*)$/m.exec(b)![1]).type)).toEqual(["custom.progress", "host.warning", "message.completed", "run.completed"]);
    expect(blocks.slice(0, 4).map((b) => /^id: (\d+)$/m.exec(b)?.[1])).toEqual(["1", "2", "3", "4"]);
  });

  it("of an ended run ends at once, with no keep-alive", async () => {
    const { runId } = await runner.run(host, "keepalive-ended", async () => "done");
    const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    const text = await res.text();
    expect(keepAlives(text)).toBe(0);
    expect(text).toMatch(/^event: end$/m);
  });
});
