import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { readSse, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A follower whose reader takes nothing queued for STALLED_AFTER_KEEPALIVES keep-alive intervals is closed (README),
 * here with its stream full: its reader may be gone without the Worker hearing of it, as nothing more is written to a
 * full stream, and what it holds would stay for as long as the conversation's object lives. A reader that was only
 * stalled reconnects with Last-Event-ID and gets the rest, its end included. A follower that keeps reading is
 * never cut, however long the run.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const KEEPALIVE_MS = 100;
// Far more than the socket buffers, workerd's and the follower's own queue hold between the reader and the run's object.
const FRAMES = 48;
const FRAME_BYTES = 512 * 1024;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "stalled" });
  host = await startTestHost({ vars: { RUN_STREAM_KEEPALIVE_MS: String(KEEPALIVE_MS) } });
  await runner.register(host);
  await putAgent(host, { agent_id: "stalled", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

/** A run that sends FRAMES large frames once `go` resolves, then its answer; answers its id as soon as it has one. */
async function largeRun(conversation: string, go: Promise<void>) {
  const started = deferred<string>();
  const done = runner.run(host, conversation, async (_api, ctx, emit) => {
    started.resolve(ctx.run_id);
    await go;
    for (let i = 0; i < FRAMES; i++) emit("custom.progress", { i, pad: "x".repeat(FRAME_BYTES) });
    return "done";
  });
  return { runId: await started.promise, done };
}

/** The last frame id the text holds whole (a block ended by a blank line). */
const lastFrameId = (text: string) => Math.max(0, ...[...text.matchAll(/^id: (\d+)\n[^]*?\n\n/gm)].map((m) => Number(m[1])));

describe("a follower whose reader stops taking frames", () => {
  it("is closed once its stream has been full that long; a reconnect with Last-Event-ID gets the rest and the end", async () => {
    const go = deferred<void>();
    const { runId, done } = await largeRun("stalled-reader", go.promise);
    const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth() });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    go.resolve();
    await done;
    // The run is over; the follower's stream has been full, untaken, for many keep-alive intervals.
    await new Promise((r) => setTimeout(r, 20 * KEEPALIVE_MS));

    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      // Cut: the read ends (or errors) where the host stopped.
      const r = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (r.done) break;
      text += decoder.decode(r.value, { stream: true });
    }
    expect(text).not.toContain("event: end");
    const had = lastFrameId(text);
    expect(had).toBeLessThan(FRAMES);

    const again = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { ...auth(), "last-event-id": String(had) } });
    const rest = await readSse(again);
    expect(rest.end).toBe("completed");
    expect(rest.frames[0].seq).toBe(had + 1);
    expect(rest.frames.filter((f) => f.type === "custom.progress").map((f) => f.data.i).at(-1)).toBe(FRAMES - 1);
  });

  it("is not cut while its reader keeps taking frames", async () => {
    const go = deferred<void>();
    const { runId, done } = await largeRun("reading-follower", go.promise);
    const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth() });
    go.resolve();
    const [all] = await Promise.all([readSse(res), done]);
    expect(all.end).toBe("completed");
    expect(all.frames.filter((f) => f.type === "custom.progress")).toHaveLength(FRAMES);
  });
});
