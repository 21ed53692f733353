import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "ledgered" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "ledgered", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** Every page of a listing, following next_cursor while has_more. */
async function allPages(path: string, limit: number) {
  const pages: any[] = [];
  let cursor: string | undefined;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const res = await host.admin("GET", `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    expect(res.status).toBe(200);
    pages.push(res.body);
    cursor = res.body.has_more ? res.body.next_cursor : undefined;
  } while (cursor);
  return pages;
}

describe("GET /v1/runs", () => {
  it("lists runs newest first, filtered by conversation and status, paged with opaque cursors", async () => {
    const runIds: string[] = [];
    for (const text of ["one", "two", "three"]) {
      const posted = await host.postEvent(messageEvent("runs-list", text));
      runIds.push(posted.body.run_id!);
      await host.waitForRun(posted.body.run_id!);
    }
    const failing = await runner.run(host, "runs-list", async () => {
      throw new Error("boom");
    }).catch((err: Error) => err);
    expect(failing).toBeInstanceOf(Error);
    await host.postEvent(messageEvent("runs-elsewhere", "not listed"));

    const all = await host.admin("GET", "/v1/runs?conversation_id=runs-list");
    expect(all.body.items).toHaveLength(4);
    expect(all.body.has_more).toBe(false);
    expect(all.body.items.slice(1).map((r: any) => r.run_id)).toEqual([...runIds].reverse());
    expect(all.body.items[0]).toMatchObject({ status: "failed", error: { code: "test.script_failed" } });

    const paged = await allPages("/v1/runs?conversation_id=runs-list", 1);
    expect(paged.map((p) => p.items[0].run_id)).toEqual(all.body.items.map((r: any) => r.run_id));

    const failed = await host.admin("GET", "/v1/runs?conversation_id=runs-list&status=failed");
    expect(failed.body.items.map((r: any) => r.status)).toEqual(["failed"]);
    const completed = await host.admin("GET", "/v1/runs?status=completed&limit=200");
    expect(completed.body.items.every((r: any) => r.status === "completed")).toBe(true);
    expect(completed.body.items.map((r: any) => r.run_id)).toEqual(expect.arrayContaining(runIds));
  });

  it("cuts a page of runs with large final messages at 4 MiB past its first, and the next pages carry the rest", async () => {
    const runIds: string[] = [];
    for (let i = 0; i < 6; i++) runIds.push((await runner.run(host, "runs-large", async () => String(i).repeat(900_000))).runId);
    const first = await host.admin("GET", "/v1/runs?conversation_id=runs-large&limit=200");
    expect(first.body.items.length).toBeLessThan(6);
    expect(first.body.has_more).toBe(true);
    expect(first.body.items.every((r: any) => r.message.content.length === 900_002)).toBe(true);
    const listed = (await allPages("/v1/runs?conversation_id=runs-large", 200)).flatMap((p) => p.items.map((r: any) => r.run_id));
    expect(listed).toEqual([...runIds].reverse());
  });

  it("refuses bad filters and cursors with 400 and anyone without the admin token with 401", async () => {
    expect((await host.admin("GET", "/v1/runs?status=sleeping")).status).toBe(400);
    expect((await host.admin("GET", "/v1/runs?limit=0")).status).toBe(400);
    expect((await host.admin("GET", "/v1/runs?cursor=%25%25%25")).status).toBe(400);
    const ledgerCursor = Buffer.from("r:1").toString("base64").replace(/=+$/, "");
    expect((await host.admin("GET", `/v1/runs?cursor=${ledgerCursor}`)).status).toBe(400);
    // A well-formed cursor whose time is past any real one (it would reach SQL as Infinity).
    const farFuture = Buffer.from(`k:runs:${"9".repeat(400)}:run_x`).toString("base64");
    expect((await host.admin("GET", `/v1/runs?cursor=${encodeURIComponent(farFuture)}`)).status).toBe(400);
    expect((await fetch(`${host.url}/v1/runs`)).status).toBe(401);
  });
});

describe("GET /v1/runs/{run_id}/events", () => {
  it("pages the whole ledger in order, the same entries the stream replays", async () => {
    const { runId } = await runner.run(host, "runs-ledger", async (_api, _ctx, emit) => {
      emit("tool.call.started", { tool_call_id: "c1", tool_name: "search", parameters: {} });
      emit("tool.call.completed", { tool_call_id: "c1", tool_name: "search", result: { hits: 2 } });
      emit("custom.telemetry", { n: 1 });
      return "ok";
    });
    const pages = await allPages(`/v1/runs/${runId}/events`, 2);
    const entries = pages.flatMap((p) => p.items);
    expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
    expect(entries.map((e) => e.type)).toEqual(["tool.call.started", "tool.call.completed", "custom.telemetry", "host.warning", "message.completed", "run.completed"]);
    expect(pages.at(-1).run_status).toBe("completed");

    const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    const { frames } = await readSse(res);
    expect(frames.map((f) => [f.seq, f.type, f.data])).toEqual(entries.map((e) => [e.seq, e.type, e.data]));

    // From the last position there is nothing more; the cursor stays usable.
    const tail = await host.admin("GET", `/v1/runs/${runId}/events?cursor=${pages.at(-1).next_cursor}`);
    expect(tail.body).toMatchObject({ items: [], has_more: false, next_cursor: pages.at(-1).next_cursor });
  });

  it("replays a ledger of megabytes page by page, through the stream and the events listing alike", async () => {
    // 40 entries of about 200 KiB: about 8 MiB, several byte-bounded pages.
    const { runId } = await runner.run(host, "runs-big-ledger", async (_api, _ctx, emit) => {
      for (let i = 0; i < 40; i++) emit("custom.telemetry", { i, blob: String(i % 10).repeat(200 * 1024) });
      return "ok";
    });
    const res = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    const { frames, end } = await readSse(res);
    expect(end).toBe("completed");
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    expect(frames.filter((f) => f.type === "custom.telemetry").map((f) => [f.data.i, f.data.blob.length])).toEqual(Array.from({ length: 40 }, (_, i) => [i, 200 * 1024]));
    const first = await host.admin("GET", `/v1/runs/${runId}/events?limit=100`);
    // Five entries of 200 KiB (each with its small unknown-type warning) fill a 1 MiB page; the sixth would pass it.
    expect(first.body.items.filter((e: { type: string }) => e.type === "custom.telemetry")).toHaveLength(5);
    expect(first.body.has_more).toBe(true);
  });

  it("lets a client follow a running run from its cursor until the run ends", async () => {
    const release = deferred();
    const emitted = deferred();
    const done = runner.run(host, "runs-follow", async (_api, _ctx, emit) => {
      emit("tool.call.started", { tool_call_id: "c1", tool_name: "slow", parameters: {} });
      emitted.resolve();
      await release.promise;
      return "finished";
    });
    await emitted.promise;
    const running = (await host.admin("GET", "/v1/runs?conversation_id=runs-follow&status=running")).body.items;
    expect(running).toHaveLength(1);
    const runId = running[0].run_id;
    let first: any;
    for (let i = 0; i < 200 && !first?.items.length; i++) {
      first = (await host.admin("GET", `/v1/runs/${runId}/events`)).body;
      if (!first.items.length) await new Promise((r) => setTimeout(r, 10));
    }
    expect(first).toMatchObject({ items: [{ seq: 1, type: "tool.call.started" }], has_more: false, run_status: "running" });

    release.resolve();
    await done;
    const rest = (await host.admin("GET", `/v1/runs/${runId}/events?cursor=${first.next_cursor}`)).body;
    expect(rest.items.map((e: any) => e.seq)).toEqual([2, 3]);
    expect(rest.run_status).toBe("completed");
  });

  it("a stream opened mid-run replays the results so far, then follows the run to its end", async () => {
    const started = deferred<string>();
    const release = deferred<void>();
    const finished = runner.run(host, "runs-mid-stream", async (_api, ctx, emit) => {
      emit("message.delta", { chunk: { role: "assistant", content: "early" } });
      started.resolve(ctx.run_id);
      await release.promise;
      return "late";
    });
    const runId = await started.promise;
    for (let i = 0; (await host.admin("GET", `/v1/runs/${runId}/events`)).body.items.length === 0; i++) {
      if (i > 500) throw new Error("the delta was never recorded");
      await new Promise((r) => setTimeout(r, 10));
    }
    // Two followers of the same run get the same frames, each encoded once and written to both.
    const streams = await Promise.all([1, 2].map(() => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } })));
    expect(streams.map((r) => r.status)).toEqual([200, 200]);
    release.resolve();
    const [{ frames, end }, second] = await Promise.all(streams.map(readSse));
    expect(end).toBe("completed");
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    expect(frames[0]).toMatchObject({ type: "message.delta", data: { chunk: { content: "early" } } });
    expect(frames.at(-1)?.type).toBe("run.completed");
    expect(second).toEqual({ frames, end });
    await finished;
  });

  it("answers 404 for the stream of a run its conversation never had", async () => {
    const { runId } = await runner.run(host, "runs-stream-404", async () => "ok");
    const sibling = runId.replace(/_[0-9a-z]+$/, "_0000000000000000");
    for (const id of [sibling, "run_unknown"]) {
      const res = await fetch(`${host.url}/v1/runs/${id}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
    }
  });

  it("answers 404 for an unknown run and 400 for a cursor of another listing", async () => {
    expect((await host.admin("GET", "/v1/runs/run_unknown/events")).status).toBe(404);
    const { runId } = await runner.run(host, "runs-cursor", async () => "ok");
    const transcriptCursor = Buffer.from("t:1").toString("base64").replace(/=+$/, "");
    expect((await host.admin("GET", `/v1/runs/${runId}/events?cursor=${transcriptCursor}`)).status).toBe(400);
    expect((await host.admin("GET", `/v1/runs/${runId}/events?limit=1001`)).status).toBe(400);
  });
});
