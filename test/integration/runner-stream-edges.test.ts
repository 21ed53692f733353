import { deflateSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * The edges of a runner's result stream. What arrived intact before the
 * stream broke a limit is applied (it may hold the run's answer and its
 * `run.completed`), in NDJSON and SSE alike: a too-large SSE frame after the
 * terminal result, or the chunk that crosses the stream's byte limit, does
 * not undo what came before. An SSE stream may end its lines with CRLF, LF
 * or a lone CR, as text/event-stream allows, its last frame may end with the
 * stream itself, and its frames hold results as large as NDJSON lines may be.
 * A last line that is not UTF-8 fails the run only after what came before it.
 * Any Content-Type but text/event-stream is read as NDJSON, and NDJSON under
 * that label fails the run as no stream of results.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
// Small, so what breaks a limit is written with the results in one chunk.
const LINE_LIMIT = 256;
const STREAM_LIMIT = 1024;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "stream-edges",
    async onRun({ body }, res) {
      const ctx = body.context;
      const result = (type: string, data: unknown, sequence: number) => JSON.stringify({ run_id: ctx.run_id, type, data, sequence });
      const done = [result("message.completed", { message: { role: "assistant", content: "the answer" } }, 1), result("run.completed", { finish_reason: "stop" }, 2)];
      const mode: string = ctx.input.text;
      // Each mode answers in one write: the runner's results and what breaks a limit share a chunk.
      if (mode === "ndjson-too-large-after") {
        // Over the line limit (every line of the SSE variant below is under it, their frame is not).
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        return void res.end(`${done.join("\n")}\n${"x".repeat(LINE_LIMIT * 2)}\n`);
      }
      if (mode === "sse-too-large-after") {
        const part = "x".repeat(LINE_LIMIT / 2);
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(`${done.map((d) => `data: ${d}\n\n`).join("")}data: ${part}\ndata: ${part}\ndata: ${part}\n\n`);
      }
      if (mode === "ndjson-at-limit" || mode === "ndjson-crlf-at-limit" || mode === "sse-at-limit") {
        // A message whose result is exactly the line limit: what the limit allows, whichever framing carries it.
        const bare = result("message.completed", { message: { role: "assistant", content: "" } }, 1);
        const atLimit = result("message.completed", { message: { role: "assistant", content: "y".repeat(LINE_LIMIT - Buffer.byteLength(bare)) } }, 1);
        if (Buffer.byteLength(atLimit) !== LINE_LIMIT) throw new Error("the result is not at the limit");
        const lines = [atLimit, done[1]];
        if (mode !== "sse-at-limit") {
          // With CRLF line ends too, which NDJSON allows: the CR ends the line, it is not part of the result.
          const eol = mode === "ndjson-at-limit" ? "\n" : "\r\n";
          res.writeHead(200, { "content-type": "application/x-ndjson" });
          return void res.end(`${lines.join(eol)}${eol}`);
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(lines.map((l) => `data: ${l}\n\n`).join(""));
      }
      if (mode === "past-stream-limit") {
        const late = result("tool.call.completed", { tool_call_id: "t", tool_name: "late", result: "x".repeat(LINE_LIMIT / 4) }, 3);
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        return void res.end(`${done.join("\n")}\n${`${late}\n`.repeat(Math.ceil(STREAM_LIMIT / late.length))}`);
      }
      if (mode === "sse-holding-ndjson") {
        // NDJSON under a text/event-stream label (a framework's streaming response mislabelled): no `data:` field holds a result.
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(`${done.join("\n")}\n`);
      }
      if (mode === "json-labelled" || mode === "unlabelled") {
        // Many frameworks stream as application/json, or name no type at all: read as NDJSON all the same.
        res.writeHead(200, mode === "json-labelled" ? { "content-type": "application/json" } : {});
        return void res.end(`${done.join("\n")}\n`);
      }
      if (mode === "after-terminal") {
        // A message after run.completed: the host has stopped reading by then.
        const after = result("message.completed", { message: { role: "assistant", content: "after the end" } }, 3);
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        return void res.end(`${done.join("\n")}\n${after}\n`);
      }
      if (mode === "over-stream-limit") {
        // The answer, then telemetry (each line under the line limit) past the stream's byte limit, and no terminal result.
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        res.write(`${done[0]}\n`);
        for (let i = 0, sent = 0; sent <= STREAM_LIMIT; i++) {
          const line = `${result("tool.call.started", { tool_call_id: `t${i}`, tool_name: "search", parameters: {} }, i + 2)}\n`;
          sent += line.length;
          res.write(line);
        }
        return void res.end();
      }
      if (mode === "gzip" || mode === "deflate") {
        // Compressed as a proxy or framework in front of a runner may: gzip (and br) are decoded, deflate is not.
        res.writeHead(200, { "content-type": "application/x-ndjson", "content-encoding": mode });
        return void res.end((mode === "gzip" ? gzipSync : deflateSync)(`${done.join("\n")}\n`));
      }
      if (mode === "ndjson-bad-last-line" || mode === "sse-bad-last-line") {
        // The answer whole, then a last line cut off inside a character (no line end after it): not UTF-8, one write.
        const bad = Buffer.from([...Buffer.from(mode === "ndjson-bad-last-line" ? `{"run_id":"${ctx.run_id}","x":"` : "data: "), 0xe2, 0x82]);
        const before = mode === "ndjson-bad-last-line" ? `${done[0]}\n` : `data: ${done[0]}\n\n`;
        res.writeHead(200, { "content-type": mode === "ndjson-bad-last-line" ? "application/x-ndjson" : "text/event-stream" });
        return void res.end(Buffer.concat([Buffer.from(before), bad]));
      }
      if (mode.startsWith("sse-open-last-frame")) {
        // The last frame (run.completed) ends the stream without the blank line after it: with its line's end, or without.
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(`data: ${done[0]}\n\nevent: result\ndata: ${done[1]}${mode.endsWith("-lf") ? "\n" : ""}`);
      }
      const eol = { "sse-lf": "\n", "sse-crlf": "\r\n", "sse-cr": "\r" }[mode]!;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(done.map((d) => `data: ${d}${eol}${eol}`).join(""));
    },
  });
  host = await startTestHost({ vars: { RUNNER_MAX_LINE_BYTES: String(LINE_LIMIT), RUNNER_MAX_STREAM_BYTES: String(STREAM_LIMIT) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "stream-edges" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function runOf(mode: string) {
  const ev = await host.postEvent(messageEvent(`stream-edges-${mode}`, mode));
  const run = await host.waitForRun(ev.body.run_id!);
  const items = await host.query<{ content: string }>("SELECT content FROM transcript WHERE run_id = ? AND role = 'assistant'", [ev.body.run_id!]);
  return { status: run.status, transcript: items.map((i) => i.content) };
}
const answered = { status: "completed", transcript: ["the answer"] };

async function failureOf(mode: string) {
  const ev = await host.postEvent(messageEvent(`stream-edges-${mode}`, mode));
  const run = await host.waitForRun(ev.body.run_id!);
  const items = await host.query<{ content: string }>("SELECT content FROM transcript WHERE run_id = ? AND role = 'assistant'", [ev.body.run_id!]);
  return { status: run.status, code: run.error?.code, message: run.error?.message, transcript: items.map((i) => i.content) };
}

describe("a limit broken after the terminal result, in the same chunk", () => {
  it("NDJSON: a line too large does not undo the answer and run.completed", async () => {
    expect(await runOf("ndjson-too-large-after")).toEqual(answered);
  });
  it("SSE: a frame too large does not undo them either", async () => {
    expect(await runOf("sse-too-large-after")).toEqual(answered);
  });
  it("the stream's byte limit, crossed by the chunk that holds them, does not undo them", async () => {
    expect(await runOf("past-stream-limit")).toEqual(answered);
  });
});

describe("a last line that is not UTF-8, sent without its line end", () => {
  for (const framing of ["ndjson", "sse"]) {
    it(`${framing}: fails the run as a bad line, after applying the answer that came whole before it`, async () => {
      const ev = await host.postEvent(messageEvent(`stream-edges-${framing}-bad-last-line`, `${framing}-bad-last-line`));
      const run = await host.waitForRun(ev.body.run_id!);
      expect([run.status, run.error?.code, run.error?.message]).toEqual(["failed", "runner.protocol_error", "a result line is not valid UTF-8"]);
      const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items as { type: string; data: any }[];
      expect(ledger.filter((e) => e.type === "message.completed").map((e) => e.data.message.content)).toEqual(["the answer"]);
    });
  }
});

describe("a compressed result stream", () => {
  it("gzip is read; deflate, which the host does not decode, fails the run saying so", async () => {
    expect(await runOf("gzip")).toEqual(answered);
    const ev = await host.postEvent(messageEvent("stream-edges-deflate", "deflate"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.protocol_error"]);
    expect(run.error?.message).toContain("Content-Encoding deflate");
  });
});

describe("an SSE result stream", () => {
  for (const eol of ["lf", "crlf", "cr"]) {
    it(`with ${eol} line endings completes the run`, async () => {
      expect(await runOf(`sse-${eol}`)).toEqual(answered);
    });
  }

  it("carries a result as large as an NDJSON line may be: the limit is the result's, not counting the `data: ` before it", async () => {
    const atLimit = { status: "completed", transcript: [expect.stringMatching(/^y+$/)] };
    expect([await runOf("ndjson-at-limit"), await runOf("sse-at-limit")]).toEqual([atLimit, atLimit]);
  });

  it("NDJSON with CRLF line ends carries a result at the limit too: the CR ends the line, it is not the result's", async () => {
    expect(await runOf("ndjson-crlf-at-limit")).toEqual({ status: "completed", transcript: [expect.stringMatching(/^y+$/)] });
  });

  it("whose last frame ends with the stream, without the blank line after it, still ends the run as that frame says", async () => {
    // As an NDJSON stream whose last line lacks its newline: the runner sent run.completed, the run is not failed for it.
    expect([await runOf("sse-open-last-frame-lf"), await runOf("sse-open-last-frame-eof")]).toEqual([answered, answered]);
  });
});

describe("the framing a runner's answer is read in (PROTOCOL §3)", () => {
  it("application/json, or no Content-Type at all, is read as NDJSON", async () => {
    expect([await runOf("json-labelled"), await runOf("unlabelled")]).toEqual([answered, answered]);
  });

  it("NDJSON sent as text/event-stream is no stream of results: runner.protocol_error saying how to frame it, not a stream closed early", async () => {
    expect(await failureOf("sse-holding-ndjson")).toEqual({
      status: "failed",
      code: "runner.protocol_error",
      message: expect.stringContaining("answer Content-Type application/x-ndjson"),
      transcript: [],
    });
  });

  it("nothing after the terminal result is read: a message sent after run.completed is not the run's", async () => {
    expect(await runOf("after-terminal")).toEqual(answered);
  });

  it("past the stream's byte limit the run fails runner.stream_too_large, keeping the answer that came before", async () => {
    expect(await failureOf("over-stream-limit")).toEqual({ status: "failed", code: "runner.stream_too_large", message: `result stream exceeded ${STREAM_LIMIT} bytes`, transcript: ["the answer"] });
  });
});
