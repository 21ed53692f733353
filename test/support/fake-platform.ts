import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { resultWriter, startAdHocRunner } from "./runner";

export interface PlatformCall {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  /** The body parsed as JSON, or null. */
  body: any;
  raw: string;
  /** When the call arrived (ms since the epoch). */
  at: number;
  /** What the fake answered. */
  reply?: FakeReply;
}

export interface FakeReply {
  status?: number;
  headers?: Record<string, string>;
  json?: unknown;
  bytes?: Uint8Array;
}

/**
 * A chat platform's API on loopback: every call is recorded and answered by
 * `answer` (the test's model of the platform, 429s included).
 */
export async function startFakePlatform(answer: (call: PlatformCall) => FakeReply | Promise<FakeReply>) {
  const calls: PlatformCall[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    const url = new URL(req.url ?? "/", "http://fake");
    let body: unknown = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      body = null;
    }
    const call: PlatformCall = { method: req.method ?? "GET", path: decodeURIComponent(url.pathname), query: url.searchParams, headers: req.headers, body, raw, at: Date.now() };
    calls.push(call);
    const reply = await answer(call);
    call.reply = reply;
    res.writeHead(reply.status ?? 200, { "content-type": reply.bytes ? "application/octet-stream" : "application/json", ...reply.headers });
    res.end(reply.bytes ?? JSON.stringify(reply.json ?? {}));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls,
    /** Calls whose path matches, in arrival order. */
    callsTo: (pattern: RegExp) => calls.filter((c) => pattern.test(c.path)),
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** Poll until `check` returns a value (not undefined/false) or time runs out. */
export async function waitFor<T>(check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 15_000, what = "condition"): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The runner the platform tests bind: `stream <words>` streams one word per
 * `STREAM_STEP_MS` then completes with the words (`bigstream <chunks> <chars>`
 * streams long chunks the same way); `long <n>` answers n
 * characters in lines; `differ <text>` streams a draft then completes with
 * `<text>`; anything else is echoed. Every run's context is kept.
 */
export const STREAM_STEP_MS = 250;
export async function startChatRunner(name: string) {
  const contexts: any[] = [];
  const runner = await startAdHocRunner({
    name,
    async onRun({ body }, res) {
      const ctx = body.context;
      contexts.push(ctx);
      const text = String(ctx.input.text ?? "");
      const w = resultWriter(res, ctx.run_id);
      if (text.startsWith("stream ")) {
        const words = text.slice("stream ".length).split(" ").map((word, i) => (i ? ` ${word}` : word));
        for (const word of words) {
          w.send("message.delta", { chunk: { role: "assistant", content: word } });
          await sleep(STREAM_STEP_MS);
        }
        return w.reply(words.join(""));
      }
      if (text.startsWith("bigstream ")) {
        // `bigstream <chunks> <chars>`: long chunks, to stream past a message's size limit.
        const [chunks, chars] = text.slice("bigstream ".length).split(" ").map(Number);
        const pieces = Array.from({ length: chunks }, (_, i) => longText(chars).replace(/^line 1 /, `chunk ${i + 1} `));
        for (const piece of pieces) {
          w.send("message.delta", { chunk: { role: "assistant", content: piece } });
          await sleep(STREAM_STEP_MS);
        }
        return w.reply(pieces.join(""));
      }
      if (text.startsWith("differ ")) {
        w.send("message.delta", { chunk: { role: "assistant", content: "draft that will be replaced" } });
        await sleep(STREAM_STEP_MS);
        return w.reply(text.slice("differ ".length));
      }
      if (text.startsWith("long ")) return w.reply(longText(Number(text.slice(5))));
      // `sleep <ms>`: a runner thinking, silent, before it answers.
      if (text.startsWith("sleep ")) await sleep(Number(text.slice("sleep ".length)));
      if (text === "shrink") {
        // A draft that spills into a second message, then a final answer that fits in one.
        // Spaced past the 1 s edit interval, so the draft is really shown in two messages.
        for (const n of [1, 2]) {
          w.send("message.delta", { chunk: { role: "assistant", content: longText(1500).replace(/^line 1 /, `draft ${n} `) } });
          await sleep(1200);
        }
        return w.reply("short final");
      }
      if (text === "fail") {
        w.send("run.failed", { code: "runner.crashed", error: "the runner gave up", retryable: false });
        res.end();
        return;
      }
      w.reply(`echo: ${text || "(no text)"}`);
    },
  });
  return { ...runner, contexts };
}

/** n characters of numbered lines, so a split shows where it cut. */
export function longText(n: number): string {
  let out = "";
  for (let i = 1; out.length < n; i++) out += `line ${i} ${"abcdefghij".repeat(5)}\n`;
  return out.slice(0, n);
}

/** Every write to one message is at least `gapMs` after the previous one (small clock tolerance). */
export function gapsBetween(times: number[]): number[] {
  return times.slice(1).map((t, i) => t - times[i]);
}
