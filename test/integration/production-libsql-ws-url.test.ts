import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Miniflare } from "miniflare";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { join } from "node:path";
import { ROOT } from "../../local/build";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS } from "../../local/host";
import { openEmbeddedDb } from "../../local/libsql";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { startFakeSqld } from "../support/fake-sqld";

/**
 * ARCHITECTURE "libSQL": every round trip is bounded by DB_QUERY_TIMEOUT_MS, so a database that hangs fails the
 * call instead of holding a run or an alarm. @libsql/client/web also takes `ws://` / `wss://` URLs (older Turso
 * instructions give `wss://…`), which it reaches over a WebSocket: the timeout the host puts on its fetch is not
 * applied to those, so a hung database holds every request for good.
 */
const ADMIN_TOKEN = "prod-admin-token-0123456789";
let silent: Server;
const sockets: Socket[] = [];
let port: number;
let reached = 0;

beforeAll(async () => {
  // Takes the HTTP request or the WebSocket upgrade and never answers: a hung sqld, or a proxy holding the call.
  silent = createServer((req) => {
    reached++;
    req.resume();
  });
  silent.on("upgrade", (_req, socket: Socket) => {
    reached++;
    sockets.push(socket);
  });
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  port = (silent.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  silent.closeAllConnections();
  await new Promise((r) => silent.close(r));
});

function worker(libsqlUrl: string) {
  return new Miniflare({
    host: "127.0.0.1",
    port: 0,
    modules: true,
    scriptPath: join(ROOT, "dist/test/worker.js"),
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: [...COMPATIBILITY_FLAGS],
    durableObjects: { CONVERSATIONS: { className: "ConversationDO", useSQLite: true } },
    r2Buckets: ["ARTIFACTS"],
    bindings: { ADMIN_TOKEN, LIBSQL_URL: libsqlUrl, DB_QUERY_TIMEOUT_MS: "300" },
    handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
      stdout.resume();
      stderr.resume();
    },
  });
}

describe("a LIBSQL_URL given as ws:// or wss://", () => {
  it("reaches the server that serves it, over HTTP", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ws-url-"));
    (await openEmbeddedDb(`file:${join(dir, "db")}`)).close();
    const sqld = await startFakeSqld(join(dir, "db"));
    const mf = worker(sqld.url.replace(/^http:/, "ws:"));
    try {
      const res = await fetch(`${(await mf.ready).origin}/v1/admin/agents`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(res.status).toBe(200);
      expect(sqld.requests.length).toBeGreaterThan(0);
    } finally {
      await mf.dispose();
      await sqld.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const scheme of ["ws", "http"]) {
    it(`(${scheme}://) still bounds every round trip by DB_QUERY_TIMEOUT_MS`, async () => {
      const mf = worker(`${scheme}://127.0.0.1:${port}`);
      try {
        const url = (await mf.ready).origin;
        const started = Date.now();
        const before = reached;
        const answer = await Promise.race([
          fetch(`${url}/v1/admin/agents`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then((r) => r.status),
          new Promise<string>((r) => setTimeout(() => r("no answer"), 4_000)),
        ]);
        // The database was asked (it is what hangs), and the call still failed within its bound.
        expect(reached).toBeGreaterThan(before);
        expect(answer).toBe(500);
        expect(Date.now() - started).toBeLessThan(4_000);
      } finally {
        await mf.dispose();
      }
    });
  }
});
