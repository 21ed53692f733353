import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, runEndedLines, startTestHost, type TestHost } from "../support/host";
import { listenLoopback, type LoopbackServer } from "../support/http-server";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * One runner that misbehaves on request: the text of the message names the
 * failure. "ok" answers with the history and events it can read, proving the
 * earlier, failed turn left the event and the transcript intact.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const tokens = new Map<string, string>();
const LINE_LIMIT = 64 * 1024;
/** Where the "redirect" mode points: it counts what reaches it. */
let elsewhere: LoopbackServer;
let elsewhereCalls = 0;

beforeAll(async () => {
  elsewhere = await listenLoopback((_req, res) => {
    elsewhereCalls++;
    res.writeHead(200, { "content-type": "application/x-ndjson" }).end();
  });
  runner = await startAdHocRunner({
    name: "chaos",
    async onRun({ body }, res) {
      const ctx = body.context;
      tokens.set(ctx.run_id, ctx.runtime.api.token);
      const out = () => resultWriter(res, ctx.run_id);
      const mode = String(ctx.input.text).split(" ")[0];
      switch (mode) {
        case "http500":
          res.writeHead(500).end("boom");
          return;
        case "refuse401":
          res.writeHead(401, { "content-type": "text/plain" }).end("invalid signature: timestamp too old");
          return;
        case "traceback500":
          // As a Python runner's unhandled exception reads, with a terminal colour escape and a CRLF in it.
          res.writeHead(500, { "content-type": "text/plain" }).end(`Traceback (most recent call last):\n  File "runner.py", line 42, in do_POST\r\n\u001b[31mKeyError: 'context'\u001b[0m\n`);
          return;
        case "json422":
          res.writeHead(422, { "content-type": "application/json" }).end(JSON.stringify({ error: "field 'runner_name' is missing" }));
          return;
        case "bidi403":
          // A right-to-left override would show what follows it reversed wherever the error is read ("exe.gnp" as "png.exe").
          res.writeHead(403, { "content-type": "text/plain" }).end("see \u202eexe.gnp\u202c, \u2066isolated\u2069 \u200fmarked\u200e");
          return;
        case "zerowidth403":
          // Zero-width characters hide where they are: "adm\u200bin" reads as "admin".
          res.writeHead(403, { "content-type": "text/plain" }).end("user adm\u200bin\u200c\u200d, word\u2060joined, \ufeffmarked");
          return;
        case "controls500":
          // Each control character is six as escaped (\u0001): the error stays a few hundred characters all the same.
          res.writeHead(500, { "content-type": "text/plain" }).end(`x${"\u0001".repeat(400)}`);
          return;
        case "huge500":
          res.writeHead(500, { "content-type": "text/plain" }).end(`${"stack frame\n".repeat(20_000)}THE END`);
          return;
        case "stall503":
          // Its reason, then a body that never ends: the run still ends promptly, as the runner's refusal.
          res.writeHead(503, { "content-type": "text/plain" });
          res.write("overloaded, try later");
          return;
        case "redirect":
          res.writeHead(307, { location: `${elsewhere.url}/runners/default/run` }).end();
          return;
        case "garbage": {
          const w = out();
          w.send("message.delta", { chunk: { role: "assistant", content: "partial" } });
          res.write("this is not json\n");
          return; // left open: the host must stop on its own
        }
        case "nan": {
          // As Python's json.dumps writes a float NaN, far into a line whose start is only the run id.
          res.writeHead(200, { "content-type": "application/x-ndjson" });
          res.write(`{"run_id": "${ctx.run_id}", "type": "message.delta", "sequence": 1, "data": {"chunk": {"role": "assistant", "content": "x"}, "score": NaN}}\n`);
          return;
        }
        case "close": {
          const w = out();
          w.send("message.delta", { chunk: { role: "assistant", content: "half" } });
          setTimeout(() => res.destroy(), 20);
          return;
        }
        case "endearly": {
          const w = out();
          w.send("message.completed", { message: { role: "assistant", content: "no terminal" } });
          res.end();
          return;
        }
        case "hang":
          return; // never answers
        case "linger":
        case "reset": {
          // Done, but the stream stays open a while, or the connection is reset right after.
          const w = out();
          w.send("message.completed", { message: { role: "assistant", content: `${mode}ed` } });
          w.send("run.completed", { finish_reason: "stop" });
          if (mode === "linger") setTimeout(() => res.end(), 200);
          else setTimeout(() => res.destroy(), 1);
          return;
        }
        case "flood":
          res.writeHead(200, { "content-type": "application/x-ndjson" });
          res.write(`{"run_id":"${ctx.run_id}","type":"message.delta","data":{"chunk":{"role":"assistant","content":"${"x".repeat(LINE_LIMIT * 2)}`);
          return;
        case "sseflood": {
          // Each data line is under the limit; the frame they make, one result, is not.
          res.writeHead(200, { "content-type": "text/event-stream" });
          const part = JSON.stringify({ type: "text", text: "x".repeat(LINE_LIMIT / 2) });
          res.write(`data: {"run_id":"${ctx.run_id}","type":"message.completed","data":{"message":{"role":"assistant","content":[\n`);
          for (let i = 0; i < 4; i++) res.write(`data: ${part}${i < 3 ? "," : ""}\n`);
          res.end("data: ]}}}\n\n");
          return;
        }
        case "dupterminal": {
          // Its run.completed repeats its message's sequence: dropped as a duplicate, so the stream ends without one.
          const w = out();
          w.send("message.completed", { message: { role: "assistant", content: "said" } }, 1);
          w.send("run.completed", { finish_reason: "stop" }, 1);
          res.end();
          return;
        }
        case "silent": {
          const w = out();
          w.send("run.completed", { finish_reason: "stop" });
          res.end();
          return;
        }
        case "liar": {
          const w = out();
          res.write(`${JSON.stringify({ run_id: "run_someone_else", type: "message.completed", data: { message: { role: "assistant", content: "not mine" } } })}\n`);
          w.reply("never reached");
          return;
        }
        case "sloppy": {
          // Invalid strict payload, unknown type, a duplicate and a gap: dropped or warned, and the run goes on.
          const w = out();
          w.send("state.updated", { scope: "galaxy", key: "k", value: 1 });
          w.send("custom.telemetry", { anything: true });
          w.send("message.delta", { chunk: { role: "assistant", content: "a" } }, 2);
          w.send("message.delta", { chunk: { role: "assistant", content: "b" } }, 5);
          w.reply("done despite noise");
          return;
        }
        default: {
          const w = out();
          const api = (action: string, params: Record<string, unknown>) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
          const history = await api("history.page", { limit: 50 });
          const events = await api("event.page", { limit: 50 });
          w.reply(JSON.stringify({ history: history.body.data.items.map((i: any) => i.content), events: events.body.data.items.map((e: any) => e.event_id) }));
        }
      }
    },
  });
  host = await startTestHost({ captureLogs: true, vars: { RUN_DEADLINE_MS: "1500", RUNNER_MAX_LINE_BYTES: String(LINE_LIMIT) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "chaos" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await elsewhere?.close();
});

async function expectFailureIsContained(conversation: string, mode: string, status: string, code: string) {
  const failed = await host.postEvent(messageEvent(conversation, `${mode} please`, { event_id: `${conversation}-bad` }));
  expect(failed.status).toBe(202);
  const run = await host.waitForRun(failed.body.run_id!);
  expect(run.status).toBe(status);
  expect(run.error?.code).toBe(code);

  // The session is gone: the failed run's token is refused. Every mode reaches the runner, so the token was seen.
  const token = tokens.get(failed.body.run_id!);
  expect(token).toBeTypeOf("string");
  expect((await callHostApi(host.url, failed.body.run_id!, token!, "host.version")).status).toBe(401);

  // The next event runs normally and still sees the failed turn's event and user message.
  const next = await host.postEvent(messageEvent(conversation, "ok now"));
  const ok = await host.waitForRun(next.body.run_id!);
  expect(ok.status).toBe("completed");
  const seen = JSON.parse(String(ok.message?.content));
  expect(seen.history).toContain(`${mode} please`);
  expect(seen.events).toContain(`${conversation}-bad`);
  return run;
}

describe("a runner that crashes, hangs, lies or floods ends only its own run", () => {
  it("non-2xx answer → runner.http_error", () => expectFailureIsContained("fail-http", "http500", "failed", "runner.http_error"));
  it("a redirect → runner.http_error, and the signed request is not sent where it points", async () => {
    const run = await expectFailureIsContained("fail-redirect", "redirect", "failed", "runner.http_error");
    expect(run.error?.message).toMatch(/307 \(a redirect/);
    expect(elsewhereCalls).toBe(0);
  });
  it("a non-2xx answer's body starts the run's error, bounded and escaped, and stays out of the log", async () => {
    const expected: Record<string, RegExp> = {
      refuse401: /^runner answered HTTP 401: invalid signature: timestamp too old$/,
      traceback500: /^runner answered HTTP 500: Traceback \(most recent call last\):\\n  File "runner\.py", line 42, in do_POST\\r\\n\\u001b\[31mKeyError: 'context'\\u001b\[0m$/,
      json422: /^runner answered HTTP 422: \{"error":"field 'runner_name' is missing"\}$/,
      huge500: /^runner answered HTTP 500: (stack frame\\n){10,}.*…$/,
      bidi403: /^runner answered HTTP 403: see \\u202eexe\.gnp\\u202c, \\u2066isolated\\u2069 \\u200fmarked\\u200e$/,
      stall503: /^runner answered HTTP 503: overloaded, try later$/,
      zerowidth403: /^runner answered HTTP 403: user adm\\u200bin\\u200c\\u200d, word\\u2060joined, \\ufeffmarked$/,
      // 300 characters as escaped at most (49 whole escapes after the x), never an escape cut in two.
      controls500: /^runner answered HTTP 500: x(\\u0001){49}…$/,
    };
    for (const [mode, message] of Object.entries(expected)) {
      const run = await expectFailureIsContained(`fail-body-${mode}`, mode, "failed", "runner.http_error");
      expect([mode, run.error?.message]).toEqual([mode, expect.stringMatching(message)]);
      // A few hundred characters at most, whatever the runner sent; one line.
      expect(run.error!.message.length).toBeLessThan(600);
      // Nor a character that reorders the text around it (bidirectional controls): escaped as the others are.
      expect(run.error!.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/);
      await expect.poll(() => runEndedLines(host.logs(), run.run_id)).toEqual([expect.objectContaining({ status: "failed", error_code: "runner.http_error", cause: null })]);
    }
    // The runner's words may quote its users: the run's error has them, the log line does not.
    for (const words of ["timestamp too old", "KeyError", "runner_name", "stack frame", "overloaded"]) expect(host.logs()).not.toContain(words);
  });
  it("the host's run.failed says whether the same event may run if sent again: an overloaded or failing runner yes, one that refused it or broke the protocol no", async () => {
    const retryable: Record<string, boolean> = {};
    for (const mode of ["http500", "stall503", "refuse401", "json422", "redirect", "garbage", "hang"]) {
      const started = await host.postEvent(messageEvent(`retryable-${mode}`, `${mode} please`));
      await host.waitForRun(started.body.run_id!);
      const ledger = (await host.admin("GET", `/v1/runs/${started.body.run_id}/events`)).body.items as { type: string; origin: string; data: { retryable: boolean } }[];
      const end = ledger.filter((entry) => entry.type === "run.failed");
      expect(end.map((entry) => entry.origin)).toEqual(["host"]);
      retryable[mode] = end[0].data.retryable;
    }
    expect(retryable).toEqual({ http500: true, stall503: true, refuse401: false, json422: false, redirect: false, garbage: false, hang: false });
  });
  it("a garbage line → runner.protocol_error", () => expectFailureIsContained("fail-garbage", "garbage", "failed", "runner.protocol_error"));
  it("a line with NaN (Python's json.dumps) → runner.protocol_error whose message shows where", async () => {
    const run = await expectFailureIsContained("fail-nan", "nan", "failed", "runner.protocol_error");
    expect(run.error?.message).toMatch(/NaN/);
  });
  it("connection closed mid-stream → runner.stream_closed", () => expectFailureIsContained("fail-close", "close", "failed", "runner.stream_closed"));
  it("stream ends without a terminal result → runner.stream_closed", () => expectFailureIsContained("fail-end", "endearly", "failed", "runner.stream_closed"));
  it("no answer before the deadline → timeout with deadline_exceeded", () => expectFailureIsContained("fail-hang", "hang", "timeout", "deadline_exceeded"));
  it("a line over the limit → runner.line_too_large", () => expectFailureIsContained("fail-flood", "flood", "failed", "runner.line_too_large"));
  it("an SSE frame over the limit, made of lines under it → runner.line_too_large", () => expectFailureIsContained("fail-sse-flood", "sseflood", "failed", "runner.line_too_large"));
  it("a run.completed dropped as a duplicate, then the end → runner.stream_closed saying it was dropped, not that none came", async () => {
    const run = await expectFailureIsContained("fail-dup-terminal", "dupterminal", "failed", "runner.stream_closed");
    expect(run.error?.message).toBe("the result stream ended without a valid run.completed or run.failed (dropped, run.completed: duplicate sequence 1)");
  });
  it("completed without any message → runner.no_output", () => expectFailureIsContained("fail-silent", "silent", "failed", "runner.no_output"));
  it("results for another run → runner.protocol_error", () => expectFailureIsContained("fail-liar", "liar", "failed", "runner.protocol_error"));

  it("a run whose runner says run.completed is completed, however its stream then ends", async () => {
    for (const mode of ["linger", "reset"]) {
      const ev = await host.postEvent(messageEvent(`after-${mode}`, mode));
      const run = await host.waitForRun(ev.body.run_id!);
      expect([mode, run.status, run.error?.code]).toEqual([mode, "completed", undefined]);
      expect(run.message?.content).toBe(`${mode}ed`);
    }
  });

  it("drops invalid payloads, ignores unknown types and duplicate sequences, warns on gaps, and completes", async () => {
    const ev = await host.postEvent(messageEvent("fail-sloppy", "sloppy run"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect(run.status).toBe("completed");
    expect(run.message?.content).toBe("done despite noise");
    const ledger = await host.admin("GET", `/v1/runs/${ev.body.run_id}/events?limit=100`);
    const warnings = ledger.body.items.filter((e: any) => e.type === "host.warning").map((e: any) => e.data.code);
    expect(warnings).toEqual(expect.arrayContaining(["result.invalid_payload", "result.unknown_type", "result.duplicate", "result.sequence_gap"]));
    expect(ledger.body.items.some((e: any) => e.type === "custom.telemetry")).toBe(true);
  });
});
