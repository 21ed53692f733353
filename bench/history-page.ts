/**
 * Latency of `history.page` (part of `npm run bench`) through the real
 * Host API, as JSON, in a conversation of 100 transcript items and one of
 * 100,000. The cost of a page must not grow with history length
 * (target: large/small p50 ratio < 1.5).
 *
 * Path measured: HTTP from this process → Worker (Miniflare/workerd) → the
 * conversation's Durable Object (token check, snapshot, action) → libSQL
 * through the local binding → the embedded file, and back. A bench runner
 * holds one run open per conversation; this process calls the API with that
 * run's token, alternating between the two conversations so that both see
 * the same machine noise. History is seeded with one SQL statement per
 * conversation straight into the embedded file (the FTS triggers index it too).
 */
import { createClient } from "@libsql/client";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { startHost } from "../local/host";
import { workerOutputToStderr } from "./worker-output";
import { adminCall, bindRunner } from "../local/setup";
import { conversationKey } from "../src/stores/conversation-key";
import { quantile, stats } from "./stats";

const CALLS = Number(process.env.BENCH_CALLS ?? 500);
const WARMUP = 50;
const PAGE_LIMIT = 20;
const TARGET_RATIO = 1.5;
const SIZES = { small: 100, large: 100_000 } as const;
type Size = keyof typeof SIZES;

interface HeldRun {
  runId: string;
  token: string;
  baseUrl: string;
  latestCursor: string;
}

/** A runner that keeps each run open until told to finish, handing its credentials to the bench. */
async function startHoldingRunner() {
  const held = new Map<string, (run: HeldRun) => void>();
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const server = createServer(async (req, res) => {
    if (req.url === "/manifest") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ protocol: "agent-runner/v1", author: "bench", name: "history", version: "1", runners: [{ name: "default", label: { en_US: "history" }, permissions: { history: ["page"] } }] }));
      return;
    }
    let raw = "";
    for await (const c of req) raw += c;
    const ctx = JSON.parse(raw).context;
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    held.get(ctx.conversation.conversation_id)?.({ runId: ctx.run_id, token: ctx.runtime.api.token, baseUrl: ctx.runtime.api.base_url, latestCursor: ctx.context.latest_cursor });
    await released;
    res.write(`${JSON.stringify({ run_id: ctx.run_id, type: "message.completed", sequence: 1, data: { message: { role: "assistant", content: "done" } } })}\n`);
    res.end(`${JSON.stringify({ run_id: ctx.run_id, type: "run.completed", sequence: 2, data: { finish_reason: "stop" } })}\n`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** Resolves when the run for `conversationId` has started and is being held. */
    waitFor: (conversationId: string) => new Promise<HeldRun>((r) => held.set(conversationId, r)),
    release,
    close: () => server.close(),
  };
}

/** `count` transcript items in one statement: what a long-lived conversation would have accumulated. */
async function seedTranscript(dbUrl: string, conversationId: string, count: number) {
  const client = createClient({ url: dbUrl });
  const key = conversationKey({ conversationId });
  await client.execute({
    sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
      INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, conversation_id, role, item_type, content, artifact_refs_json, metadata_json, created_at)
      SELECT ? || '-' || i, ?, i, ? || '-evt-' || ((i + 1) / 2), ?, CASE i % 2 WHEN 1 THEN 'user' ELSE 'assistant' END, 'message',
        'message ' || i || ': the quick brown fox jumps over the lazy dog while the host keeps every fact', '[]', '{}', ?
      FROM n`,
    args: [count, conversationId, key, conversationId, conversationId, Date.now()],
  });
  client.close();
}

interface Page {
  items: { seq: number }[];
  next_cursor: string;
  has_more: boolean;
}

/** One call; anything but a full page with more behind it means the bench measures the wrong thing. */
async function historyPage(run: HeldRun, params: Record<string, unknown>, expected = PAGE_LIMIT): Promise<Page> {
  const res = await fetch(`${run.baseUrl}/v1/runs/${run.runId}/api`, {
    method: "POST",
    headers: { authorization: `Bearer ${run.token}`, "content-type": "application/json" },
    body: JSON.stringify({ action: "history.page", params }),
  });
  const body = (await res.json()) as { ok: boolean; data?: Page };
  if (res.status !== 200 || !body.ok || body.data!.items.length !== expected || !body.data!.has_more) {
    throw new Error(`history.page answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
  }
  return body.data!;
}

export async function benchHistoryPage() {
  const dir = mkdtempSync(join(tmpdir(), "agent-host-bench-history-"));
  const dbUrl = `file:${join(dir, "host.db")}`;
  const runner = await startHoldingRunner();
  // The held runs must outlive every call (BENCH_CALLS may be raised): a 10-minute deadline.
  const host = await startHost({ adminToken: "bench-admin-token-0123456789", dbUrl, vars: { RUN_DEADLINE_MS: "600000" }, onRuntimeOutput: workerOutputToStderr() });
  await bindRunner(host, { baseUrl: runner.url, runnerId: "http:bench/history/default", agentId: "bench-history" });

  const seedStarted = performance.now();
  for (const size of Object.keys(SIZES) as Size[]) await seedTranscript(dbUrl, `history-${size}`, SIZES[size]);
  const seedMs = performance.now() - seedStarted;

  // One held run per conversation; its event adds the newest transcript item.
  const runs = {} as Record<Size, HeldRun>;
  const runIds: string[] = [];
  for (const size of Object.keys(SIZES) as Size[]) {
    const started = runner.waitFor(`history-${size}`);
    const res = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", {
      event_type: "message.received",
      conversation_id: `history-${size}`,
      actor: { actor_type: "user", actor_id: "u" },
      input: { text: "page through everything" },
    });
    runIds.push(res.body.run_id);
    runs[size] = await started;
  }

  // Two kinds of page: the newest (what a runner reads first) and one from a cursor in the middle of the history.
  const latency: Record<Size, { latest: number[]; deep: number[] }> = { small: { latest: [], deep: [] }, large: { latest: [], deep: [] } };
  const deepCursor: Record<Size, string> = { small: "", large: "" };
  for (const size of Object.keys(SIZES) as Size[]) {
    // Reach the middle by paging backwards with the largest page: cursors are opaque, never forged.
    let cursor = runs[size].latestCursor;
    for (let remaining = Math.floor(SIZES[size] / 2); remaining > 0; remaining -= 100) {
      const limit = Math.min(100, remaining);
      cursor = (await historyPage(runs[size], { limit, before_cursor: cursor }, limit)).next_cursor;
    }
    deepCursor[size] = cursor;
  }

  for (let i = 0; i < CALLS + WARMUP; i++) {
    for (const size of Object.keys(SIZES) as Size[]) {
      for (const kind of ["latest", "deep"] as const) {
        const params = kind === "latest" ? { limit: PAGE_LIMIT } : { limit: PAGE_LIMIT, before_cursor: deepCursor[size] };
        const t0 = performance.now();
        await historyPage(runs[size], params);
        const ms = performance.now() - t0;
        if (i >= WARMUP) latency[size][kind].push(ms);
      }
    }
  }

  runner.release();
  for (const runId of runIds) {
    for (let tries = 0; tries < 200; tries++) {
      const run = await adminCall<{ status: string }>(host, "GET", `/v1/runs/${runId}`);
      if (run.body.status === "completed") break;
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  const all = (size: Size) => [...latency[size].latest, ...latency[size].deep];
  const ratioP50 = quantile(all("large"), 0.5) / quantile(all("small"), 0.5);
  const ratioP99 = quantile(all("large"), 0.99) / quantile(all("small"), 0.99);
  const report = {
    benchmark: "history-page",
    calls_per_kind: CALLS,
    page_limit: PAGE_LIMIT,
    seed_ms: +seedMs.toFixed(1),
    conversations: Object.fromEntries(
      (Object.keys(SIZES) as Size[]).map((size) => [
        size,
        { transcript_items: SIZES[size] + 1, latest_page_ms: stats(latency[size].latest), deep_page_ms: stats(latency[size].deep), all_ms: stats(all(size)) },
      ]),
    ),
    ratio_p50: +ratioP50.toFixed(3),
    ratio_p99: +ratioP99.toFixed(3),
    target_ratio: TARGET_RATIO,
    meets_target: ratioP50 < TARGET_RATIO,
  };
  await host.dispose();
  runner.close();
  rmSync(dir, { recursive: true, force: true });
  return report;
}
