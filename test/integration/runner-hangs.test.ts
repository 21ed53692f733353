import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent, runLedger } from "../support/scripted-runner";

/**
 * A runner that hangs at each stage: every run must end once, timeout or cancelled, its request closed (all the runner
 * hears of it), its token dead, the next event run.
 * A runner sending lines that carry no result (blank lines, SSE comments) as fast as the host reads them hangs too.
 */
let hangHost: TestHost;
/** Cancels are sent to this host: its deadline is far off, so a cancel delayed by a loaded machine still finds the run hanging. */
let cancelHost: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const tokens = new Map<string, string>();
const open: ServerResponse[] = [];
/** Runs whose request the host closed (the runner never ends one here): all a runner hears of a deadline or a cancel (§3, §11). */
const closed = new Set<string>();
/** What a flood may send at most (the stream limit is set as high): far more than the host reads before the deadline. */
const FLOOD_BYTES = 256 * 1024 * 1024;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "hangs",
    async onRun({ body }, res) {
      const ctx = body.context;
      tokens.set(ctx.run_id, ctx.runtime.api.token);
      const mode = String(ctx.input.text).split(" ")[0];
      open.push(res);
      res.on("close", () => closed.add(ctx.run_id));
      switch (mode) {
        case "headers":
          res.writeHead(200, { "content-type": "application/x-ndjson" });
          res.flushHeaders();
          return;
        case "sseheaders":
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write(": hello\n\n");
          return;
        case "between": {
          const w = resultWriter(res, ctx.run_id);
          w.send("message.delta", { chunk: { role: "assistant", content: "partial" } });
          return;
        }
        case "midline":
          res.writeHead(200, { "content-type": "application/x-ndjson" });
          res.write(`{"run_id":"${ctx.run_id}","type":"message.delta","data":{"chunk":`);
          return;
        case "blanks":
        case "comments": {
          res.writeHead(200, { "content-type": mode === "comments" ? "text/event-stream" : "application/x-ndjson" });
          const chunk = Buffer.from((mode === "comments" ? ":\n" : "\n").repeat(32 * 1024));
          let sent = 0;
          const pump = () => {
            while (!res.destroyed && sent < FLOOD_BYTES) {
              sent += chunk.length;
              if (!res.write(chunk)) return void res.once("drain", pump);
            }
          };
          pump();
          return;
        }
        case "trickle": {
          // Keeps sending telemetry forever: never idle, never done.
          const w = resultWriter(res, ctx.run_id);
          const t = setInterval(() => {
            if (res.destroyed || res.writableEnded) return clearInterval(t);
            w.send("tool.call.started", { tool_call_id: "c", tool_name: "t", parameters: {} });
          }, 50);
          return;
        }
        default:
          resultWriter(res, ctx.run_id).reply(`ok: ${ctx.input.text}`);
      }
    },
  });
  [hangHost, cancelHost] = await Promise.all(
    ["1500", "8000"].map((deadline) => startTestHost({ vars: { RUN_DEADLINE_MS: deadline, RUNNER_MAX_STREAM_BYTES: String(FLOOD_BYTES) } })),
  );
  for (const h of [hangHost, cancelHost]) expect((await h.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  for (const r of open) r.destroy();
  await hangHost?.dispose();
  await cancelHost?.dispose();
  await runner?.close();
});

async function hangs(conv: string, mode: string, cancelAfterMs?: number) {
  const host = cancelAfterMs === undefined ? hangHost : cancelHost;
  await putAgent(host, { agent_id: `agent-${conv}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: conv } });
  const posted = await host.postEvent(messageEvent(conv, `${mode} please`));
  const runId = posted.body.run_id!;
  const follower = fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
  const queued = await host.postEvent(messageEvent(conv, "behind"));
  let cancel: number | undefined;
  if (cancelAfterMs !== undefined) {
    // Counted from the runner's call, not the event's post: on a loaded machine the run may start late.
    await expect.poll(() => tokens.has(runId), { timeout: 10_000 }).toBe(true);
    await new Promise((r) => setTimeout(r, cancelAfterMs));
    cancel = (await host.admin("POST", `/v1/runs/${runId}/cancel`)).status;
  }
  const run = await host.waitForRun(runId, 10_000);
  const sse = await readSse(await follower);
  const ledger = await runLedger(host, runId);
  const ends = ledger.filter((e) => e.type === "run.failed" || e.type === "run.completed");
  const token = tokens.get(runId);
  const api = token ? (await callHostApi(host.url, runId, token, "host.version")).status : "never called";
  const next = await host.waitForRun(queued.body.run_id!, 10_000);
  // Closed by now, as a rule (the next run has been done since); a moment more for a loaded machine.
  for (const until = Date.now() + 2_000; !closed.has(runId) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
  const requestClosed = closed.has(runId);
  return { cancel, status: run.status, code: run.error?.code, ends: ends.length, last: ledger.at(-1)?.type, sseEnd: sse.end, api, requestClosed, next: next.status, nextMsg: next.message?.content };
}

describe("a runner that hangs", () => {
  for (const mode of ["headers", "sseheaders", "between", "midline", "trickle", "blanks", "comments"]) {
    it(`(${mode}) times out once, its request closed and its token dead, and the queued event runs`, async () => {
      const got = await hangs(`hang-${mode}`, mode);
      expect(got).toEqual({ cancel: undefined, status: "timeout", code: "deadline_exceeded", ends: 1, last: "run.failed", sseEnd: "timeout", api: 401, requestClosed: true, next: "completed", nextMsg: "ok: behind" });
    });
    it(`(${mode}) cancelled mid-hang ends cancelled once, its request closed`, async () => {
      const got = await hangs(`cancel-${mode}`, mode, 200);
      expect(got).toEqual({ cancel: 202, status: "cancelled", code: "cancelled", ends: 1, last: "run.failed", sseEnd: "cancelled", api: 401, requestClosed: true, next: "completed", nextMsg: "ok: behind" });
    });
  }
});
