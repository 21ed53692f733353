import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { timingSafeEqual } from "node:crypto";
import { serveExecutor, type SqlExecutor } from "../src/db/executor";

/**
 * Serves the embedded database's executor to the Worker over loopback HTTP,
 * in drizzle's sqlite-proxy request shape (`{sql, params, method}`), for the
 * LIBSQL service binding. A plain listener rather than a Miniflare function
 * binding because it is a third of the latency per query (measured: ~0.4 ms
 * against ~1.1 ms). Only requests carrying this start's random token are served.
 */
/**
 * On, off, "hang", `{ queries: n, matching?, reason? }`: fail the next n requests (those whose SQL contains `matching`,
 * when given; with `reason` as the database's words, else the drill's), or `{ delayMs, matching, queries? }`: hold the next (n) requests with that SQL for delayMs, then serve them,
 * or `{ answerDelayMs, matching, queries? }`: serve them at once and hold their answers (a write applied, its answer slow),
 * or `{ holdUntil, matching, onHeld?, onServed? }`: hold the next request with that SQL until `holdUntil` settles, calling `onHeld`
 * as it arrives (a race test orders other work against it without guessing how long the steps before it take), and
 * `onServed` once the database has run it (applied or refused; its caller may have given up on it long before): a test
 * of what a write landing late did waits for that, not for a guess.
 */
export type OutageMode =
  | boolean
  | "hang"
  | { queries: number; matching?: string; reason?: string }
  | { delayMs: number; matching: string; queries?: number }
  | { answerDelayMs: number; matching: string; queries?: number }
  | { holdUntil: Promise<unknown>; matching: string; onHeld?: () => void; onServed?: () => void };

export interface WorkerDbListener {
  address: string;
  /**
   * Fault drills and tests: while on, every query fails as an unreachable
   * database would (503), or with "hang" gets no answer at all until the
   * outage ends (then a 503); `{ queries: n, matching? }` fails only the next n (with that SQL).
   */
  setOutage(mode: OutageMode): void;
  close(): Promise<void>;
}

export async function listenForWorker(executor: SqlExecutor, token: string): Promise<WorkerDbListener> {
  const expected = Buffer.from(`Bearer ${token}`);
  let outage: boolean | "hang" = false;
  let failNext = { queries: 0, matching: undefined as string | undefined, reason: undefined as string | undefined };
  let delayNext = { queries: 0, matching: "", delayMs: 0 };
  let delayAnswer = { queries: 0, matching: "", delayMs: 0 };
  let holdNext: { matching: string; until: Promise<unknown>; onHeld?: () => void; onServed?: () => void } | null = null;
  const hung: ServerResponse[] = [];
  const unavailable = (res: ServerResponse, reason = "database unavailable (outage drill)") =>
    res.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ ok: false, error: { message: reason } }));
  const server = createServer(async (req, res) => {
    const given = Buffer.from(req.headers.authorization ?? "");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      res.writeHead(401).end();
      return;
    }
    if (outage) {
      req.resume();
      if (outage === "hang") hung.push(res);
      else unavailable(res);
      return;
    }
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer);
    } catch {
      // workerd broke the request off (the Worker's call was aborted, the runtime is stopping): nothing to run or answer.
      return;
    }
    let onServed: (() => void) | undefined;
    if (holdNext && Buffer.concat(chunks).includes(holdNext.matching)) {
      const held = holdNext;
      holdNext = null;
      held.onHeld?.();
      await held.until.catch(() => {});
      onServed = held.onServed;
    }
    if (delayNext.queries > 0 && Buffer.concat(chunks).includes(delayNext.matching)) {
      delayNext.queries--;
      await new Promise((r) => setTimeout(r, delayNext.delayMs));
    }
    if (failNext.queries > 0 && (failNext.matching === undefined || Buffer.concat(chunks).includes(failNext.matching))) {
      failNext.queries--;
      unavailable(res, failNext.reason);
      return;
    }
    let reply: { status: number; body: unknown };
    try {
      reply = await serveExecutor(executor, new URL(req.url ?? "/", "http://x").pathname, JSON.parse(Buffer.concat(chunks).toString("utf8")));
    } catch {
      reply = { status: 400, body: { ok: false, error: { message: "request is not JSON" } } };
    }
    onServed?.();
    if (delayAnswer.queries > 0 && Buffer.concat(chunks).includes(delayAnswer.matching)) {
      delayAnswer.queries--;
      await new Promise((r) => setTimeout(r, delayAnswer.delayMs));
    }
    res.writeHead(reply.status, { "content-type": "application/json" }).end(JSON.stringify(reply.body));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    setOutage: (mode) => {
      if (typeof mode === "object" && "holdUntil" in mode) return void (holdNext = { matching: mode.matching, until: mode.holdUntil, onHeld: mode.onHeld, onServed: mode.onServed });
      if (typeof mode === "object" && "answerDelayMs" in mode) return void (delayAnswer = { queries: mode.queries ?? 1, matching: mode.matching, delayMs: mode.answerDelayMs });
      if (typeof mode === "object" && "delayMs" in mode) return void (delayNext = { queries: mode.queries ?? 1, matching: mode.matching, delayMs: mode.delayMs });
      if (typeof mode === "object") return void (failNext = { queries: mode.queries, matching: mode.matching, reason: mode.reason });
      outage = mode;
      if (mode !== "hang") for (const res of hung.splice(0)) if (!res.destroyed) unavailable(res);
    },
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
