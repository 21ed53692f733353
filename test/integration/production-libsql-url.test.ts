import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { openEmbeddedDb } from "../../local/libsql";
import { startFakeSqld } from "../support/fake-sqld";
import { productionWorker } from "../support/production-worker";

/**
 * The production database path: no LIBSQL service binding, LIBSQL_URL set, so the Worker talks to
 * Turso/sqld through @libsql/client/web (src/db/connect.ts). The real bundle runs under workerd with
 * the bindings wrangler.toml gives it.
 */
const ADMIN_TOKEN = "prod-admin-token-0123456789";
const AUTH_TOKEN = "eyJhbGciOiJFZERTQSJ9.TURSO-SECRET-PART";

async function startWorker(vars: Record<string, string>) {
  let logs = "";
  const mf = productionWorker(
    { ADMIN_TOKEN, ...vars },
    {
      handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
        for (const s of [stdout, stderr]) s.on("data", (c: Buffer) => (logs += c.toString("utf8")));
      },
    },
  );
  const url = (await mf.ready).origin;
  const get = async (path: string) => {
    const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    return { status: res.status, body: await res.text() };
  };
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${url}${path}`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: JSON.stringify(body) });
    return { status: res.status, body: await res.text() };
  };
  // workerd's output arrives a moment after the response.
  const logsSettled = async (until = /unhandled error|misconfigured|not migrated/) => {
    for (let i = 0; i < 40 && !until.test(logs); i++) await new Promise((r) => setTimeout(r, 25));
    return logs;
  };
  return { mf, get, post, logsSettled };
}

describe("a LIBSQL_URL secret that does not parse", () => {
  // Typical paste mistakes in `wrangler secret put LIBSQL_URL`: a leading space, the value in quotes.
  for (const url of [` libsql://db-acme.turso.io?authToken=${AUTH_TOKEN}`, `"libsql://db-acme.turso.io?authToken=${AUTH_TOKEN}"`]) {
    it(`is reported naming LIBSQL_URL, without the auth token it carries (${JSON.stringify(url.slice(0, 12))}…)`, async () => {
      const w = await startWorker({ LIBSQL_URL: url });
      try {
        const res = await w.get("/v1/admin/agents");
        expect(res.status).toBe(503);
        expect(JSON.parse(res.body).error).toMatchObject({ code: "misconfigured", message: expect.stringMatching(/LIBSQL_URL/) });
        expect(res.body).not.toContain("TURSO-SECRET-PART");
        // The readiness check says the same, as an uptime monitor reads it.
        const ready = await w.get("/readyz");
        expect([ready.status, JSON.parse(ready.body).error.code]).toEqual([503, "misconfigured"]);
        expect(ready.body).not.toContain("TURSO-SECRET-PART");
        const logs = await w.logsSettled();
        expect(logs).toMatch(/misconfigured/);
        // The operator's log must not carry the credential...
        expect(logs).not.toContain("TURSO-SECRET-PART");
        // ...and says which setting is wrong.
        expect(logs).toMatch(/LIBSQL_URL/);
      } finally {
        await w.mf.dispose();
      }
    });
  }
});

describe("a LIBSQL_URL whose host name does not resolve", () => {
  it("is said as the runtime's opaque fetch failure with its known causes, by /readyz and in the log, without the auth token", async () => {
    const w = await startWorker({ LIBSQL_URL: `libsql://no-such-host.invalid?authToken=${AUTH_TOKEN}` });
    try {
      const named = /the runtime's opaque internal error \(runtime reference [^;\s]+; its known causes: a host name that does not resolve, .*\)/;
      const ready = await w.get("/readyz");
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body).error).toEqual({ code: "database_unavailable", message: expect.stringMatching(new RegExp(`^the database is unavailable \\(${named.source}\\)$`)) });
      expect((await w.get("/v1/admin/agents")).status).toBe(500);
      const logs = await w.logsSettled(/unhandled error/);
      expect(logs).toMatch(new RegExp(`unhandled error on GET /v1/admin/agents: query failed \\(.*\\): ${named.source}`));
      expect(`${ready.body}${logs}`).not.toContain("TURSO-SECRET-PART");
    } finally {
      await w.mf.dispose();
    }
  });
});

describe("a database that does not answer within DB_QUERY_TIMEOUT_MS", () => {
  let silent: Server;
  let port: number;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    // Accepts the Hrana pipeline request (or a WebSocket upgrade) and never answers: a hung Turso/sqld, or a proxy holding the call.
    silent = createServer((req) => req.resume());
    silent.on("upgrade", (_req, socket: Socket) => sockets.push(socket));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    port = (silent.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    silent.closeAllConnections();
    await new Promise((r) => silent.close(r));
  });

  // @libsql/client/web would reach a ws(s):// URL (older Turso instructions give `wss://…`) over a WebSocket, outside
  // the timed fetch: it is reached over HTTP at the same address instead, so its round trips are bounded too.
  for (const scheme of ["http", "ws"]) {
    it(`(${scheme}://) fails the query as a database timeout, not as a crash in the error mapping`, async () => {
      const w = await startWorker({ LIBSQL_URL: `${scheme}://127.0.0.1:${port}`, DB_QUERY_TIMEOUT_MS: "300" });
      try {
        const res = await Promise.race([w.get("/v1/admin/agents"), new Promise<{ status: string }>((r) => setTimeout(() => r({ status: "no answer" }), 4_000))]);
        expect(res.status).toBe(500);
        const logs = await w.logsSettled();
        expect(logs).toMatch(/unhandled error/);
        // The Worker's fetch rejects with a DOMException TimeoutError, whose `code` is the number 23.
        expect(logs).not.toMatch(/is not a function/);
        expect(logs).toMatch(/timeout/i);
      } finally {
        await w.mf.dispose();
      }
    });
  }
});

describe("a ws:// LIBSQL_URL of a database that answers", () => {
  it("is served, over HTTP", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ws-url-"));
    (await openEmbeddedDb(`file:${join(dir, "db")}`)).close();
    const sqld = await startFakeSqld(join(dir, "db"));
    const w = await startWorker({ LIBSQL_URL: sqld.url.replace(/^http:/, "ws:") });
    try {
      expect((await w.get("/v1/admin/agents")).status).toBe(200);
      expect(sqld.requests.length).toBeGreaterThan(0);
    } finally {
      await w.mf.dispose();
      await sqld.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Day one of a deployment as README "Production" lays it out: a secret not yet put, the migrate step skipped, a token
 * pasted wrong. The operator's first request must say what to fix, not `internal error` with the reason only in
 * `wrangler tail` (and there as zod's issue dump).
 */
describe("a deployment missing a step", () => {
  const EVENT = { event_type: "message.received", conversation_id: "c1", actor: { actor_type: "user", actor_id: "u1" }, input: { text: "hi" } };
  let dir: string;
  let sqld: Awaited<ReturnType<typeof startFakeSqld>>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "day-one-"));
    // A database as `turso db create` leaves it: no migration applied.
    sqld = await startFakeSqld(join(dir, "db"), { authToken: "turso-token-right" });
  });
  afterAll(async () => {
    await sqld.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("without the ADMIN_TOKEN or LIBSQL_URL secret answers 503 misconfigured, naming each and how to set it, logged one line each", async () => {
    const w = await startWorker({ ADMIN_TOKEN: "" });
    try {
      for (const res of [await w.get("/v1/admin/agents"), await w.post("/v1/events", EVENT)]) {
        expect(res.status, res.body).toBe(503);
        const error = JSON.parse(res.body).error as { code: string; message: string };
        expect(error.code).toBe("misconfigured");
        expect(error.message).toMatch(/ADMIN_TOKEN: not set: npx wrangler secret put ADMIN_TOKEN/);
        expect(error.message).toMatch(/LIBSQL_URL: not set: npx wrangler secret put LIBSQL_URL/);
      }
      const logs = await w.logsSettled();
      expect(logs).toMatch(/misconfigured: ADMIN_TOKEN: not set/);
      expect(logs).not.toMatch(/"code": "invalid_type"/);
    } finally {
      await w.mf.dispose();
    }
  });

  it("names an invalid variable the same way", async () => {
    const w = await startWorker({ LIBSQL_URL: sqld.url, LIBSQL_AUTH_TOKEN: "turso-token-right", RUN_DEADLINE_MS: "5m" });
    try {
      const res = await w.get("/v1/admin/agents");
      expect(res.status, res.body).toBe(503);
      expect(JSON.parse(res.body).error).toEqual({ code: "misconfigured", message: expect.stringMatching(/^the host is misconfigured: RUN_DEADLINE_MS: /) });
    } finally {
      await w.mf.dispose();
    }
  });

  it("on a database the migrations were not applied to answers 503 database_not_migrated, naming npm run db:migrate", async () => {
    const w = await startWorker({ LIBSQL_URL: sqld.url, LIBSQL_AUTH_TOKEN: "turso-token-right" });
    try {
      for (const res of [await w.get("/v1/admin/agents"), await w.post("/v1/events", EVENT)]) {
        expect(res.status, res.body).toBe(503);
        expect(JSON.parse(res.body).error).toEqual({ code: "database_not_migrated", message: expect.stringMatching(/no such table.*npm run db:migrate/) });
      }
      expect(await w.logsSettled()).toMatch(/not migrated.*npm run db:migrate/);
    } finally {
      await w.mf.dispose();
    }
  });

  it("with a LIBSQL_AUTH_TOKEN the database refuses answers 503 misconfigured, naming it, without the token", async () => {
    const w = await startWorker({ LIBSQL_URL: sqld.url, LIBSQL_AUTH_TOKEN: AUTH_TOKEN });
    try {
      const res = await w.get("/v1/admin/agents");
      expect(res.status, res.body).toBe(503);
      expect(JSON.parse(res.body).error).toEqual({ code: "misconfigured", message: expect.stringMatching(/LIBSQL_AUTH_TOKEN/) });
      expect(res.body + (await w.logsSettled())).not.toContain("TURSO-SECRET-PART");
    } finally {
      await w.mf.dispose();
    }
  });
});
