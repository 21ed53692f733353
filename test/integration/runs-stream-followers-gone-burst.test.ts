import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";
import { MAX_FOLLOWERS_PER_RUN, STALLED_AFTER_KEEPALIVES } from "../../src/run/live";

/**
 * Followers whose clients leave just before the host writes two frames back to back (a custom result and its
 * host.warning): workerd's write of the response fails inside workerd, and neither the Worker (no Request.signal
 * abort) nor the conversation's object (no cancel) hears of it. Their queued data then goes untaken, which is what
 * frees their slots (README): a new follower is let in within a few keep-alive intervals, not when the run ends. A
 * follower that keeps reading is never cut, and gets every frame.
 */
const KEEPALIVE_MS = 200;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "gone-burst" });
  host = await startTestHost({ vars: { RUN_STREAM_KEEPALIVE_MS: String(KEEPALIVE_MS) } });
  await runner.register(host);
  await putAgent(host, { agent_id: "gone-burst", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** Everything a stream sends, read as it comes, until it ends. */
function readAll(res: Response) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const done = (async () => {
    for (;;) {
      const r = await reader.read();
      if (r.done) return text;
      text += decoder.decode(r.value, { stream: true });
    }
  })();
  return { done, text: () => text };
}

describe("followers whose clients left before a burst of frames", () => {
  it("free their slots within a few keep-alive intervals; a follower that keeps reading gets every frame", async () => {
    const burst = deferred();
    const burstSent = deferred();
    const release = deferred();
    const started = deferred<string>();
    const done = runner.run(host, "gone-burst", async (_api, ctx, emit) => {
      started.resolve(ctx.run_id);
      await burst.promise;
      // Unknown to the host: recorded with a host.warning right after it, two frames back to back.
      emit("custom.progress", { step: 1 });
      burstSent.resolve();
      await release.promise;
      return "done";
    });
    const runId = await started.promise;
    const follow = (signal?: AbortSignal) => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: auth(), signal });

    const reading = await follow();
    expect(reading.status).toBe(200);
    const kept = readAll(reading);
    // Every other slot: a client that has had a keep-alive (its response is flowing), then leaves a while after it. (Ones
    // that left right after a frame were heard of by the Worker on the next keep-alive: not this leak.)
    const leaving = await Promise.all(
      Array.from({ length: MAX_FOLLOWERS_PER_RUN - 1 }, async () => {
        const controller = new AbortController();
        const res = await follow(controller.signal);
        expect(res.status).toBe(200);
        await res.body!.getReader().read();
        return controller;
      }),
    );
    const full = await follow();
    await full.body?.cancel();
    expect(full.status).toBe(429);
    for (const c of leaving) c.abort();
    burst.resolve();
    await burstSent.promise;
    const burstAt = Date.now();

    let next = await follow();
    // Let in after about STALLED_AFTER_KEEPALIVES intervals; the bound is far past that only for a busy machine's late timers.
    for (const until = burstAt + (STALLED_AFTER_KEEPALIVES + 26) * KEEPALIVE_MS; next.status === 429 && Date.now() < until; next = await follow()) {
      await next.body?.cancel();
      await new Promise((r) => setTimeout(r, KEEPALIVE_MS / 4));
    }
    const admitted = next.status;
    const joined = admitted === 200 ? readAll(next) : null;
    // Ended before any assertion, so a failing one leaves no run behind.
    release.resolve();
    await done;
    expect(admitted).toBe(200);
    const text = await kept.done;
    // Connected throughout: every frame, then the end, in one stream.
    const frames = [...text.matchAll(/^id: \d+\nevent: result\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]).type);
    expect(frames).toEqual(["custom.progress", "host.warning", "message.completed", "run.completed"]);
    expect(text.trimEnd().split("\n").at(-1)).toBe('data: {"status":"completed"}');
    expect((await joined!.done).trimEnd().split("\n").at(-1)).toBe('data: {"status":"completed"}');
  });
});
