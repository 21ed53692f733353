/**
 * The runner `host_overhead` binds: it records when it received a run request, answers as soon as the bench lets it
 * (`arrived(key)` gives the time, the run's id and the release), and records when it sent its last result. A run is
 * met by its id, or by its input's text when that starts with `TEXT_KEYED`: a platform's webhook answers no run id,
 * so the bench names the run by the words it sent.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";

export const TEXT_KEYED = "tg ";

export type Arrival = { at: number; runId: string; release: () => void };

export async function startBenchRunner() {
  // Whichever comes first, the run request or the bench asking for it, makes the meeting point.
  const arrivals = new Map<string, { promise: Promise<Arrival>; resolve: (a: Arrival) => void }>();
  const meeting = (key: string) => {
    let m = arrivals.get(key);
    if (!m) {
      let resolve!: (a: Arrival) => void;
      m = { promise: new Promise<Arrival>((r) => (resolve = r)), resolve };
      arrivals.set(key, m);
    }
    return m;
  };
  const arrived = (key: string) => meeting(key).promise.finally(() => arrivals.delete(key));
  const lastSent = new Map<string, number>();
  const server = createServer(async (req, res) => {
    if (req.url === "/manifest") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ protocol: "agent-runner/v1", author: "bench", name: "fast", version: "1", runners: [{ name: "default", label: { en_US: "fast" } }] }));
      return;
    }
    const t = performance.now();
    let raw = "";
    for await (const c of req) raw += c;
    if (req.url === "/floor") {
      res.setHeader("content-type", "application/x-ndjson");
      res.end('{"type":"run.completed"}\n');
      return;
    }
    const context = JSON.parse(raw).context as { run_id: string; input?: { text?: unknown } };
    const runId = context.run_id;
    const text = context.input?.text;
    const key = typeof text === "string" && text.startsWith(TEXT_KEYED) ? text : runId;
    await new Promise<void>((release) => meeting(key).resolve({ at: t, runId, release }));
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.write(`${JSON.stringify({ run_id: runId, type: "message.completed", sequence: 1, data: { message: { role: "assistant", content: "ok" } } })}\n`);
    lastSent.set(runId, performance.now());
    res.end(`${JSON.stringify({ run_id: runId, type: "run.completed", sequence: 2, data: { finish_reason: "stop" } })}\n`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrived, lastSent, close: () => server.close() };
}

export type BenchRunner = Awaited<ReturnType<typeof startBenchRunner>>;

/** Reads a run's SSE stream until its `end` frame; answers the frames read. */
export async function untilEnd(stream: Response): Promise<string> {
  const reader = stream.body!.getReader();
  let frames = "";
  const decoder = new TextDecoder();
  while (!frames.includes("event: end")) {
    const { done, value } = await reader.read();
    if (done) break;
    frames += decoder.decode(value, { stream: true });
  }
  await reader.cancel();
  return frames;
}
