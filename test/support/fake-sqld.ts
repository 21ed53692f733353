import Database from "libsql";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A stand-in for sqld/Turso on loopback: Hrana v2 over HTTP (`POST /v2/pipeline`, JSON), what
 * `@libsql/client/web` speaks by default, backed by a libSQL file opened with the native driver.
 * One connection, requests served one at a time. Errors carry the primary SQLite code, as sqld's do.
 */
type Value = { type: "null" } | { type: "integer"; value: string } | { type: "float"; value: number } | { type: "text"; value: string } | { type: "blob"; base64: string };
type Stmt = { sql?: string; sql_id?: number; args?: Value[]; named_args?: { name: string; value: Value }[]; want_rows?: boolean };
type Cond = { type: "ok" | "error"; step: number } | { type: "not"; cond: Cond } | { type: "and" | "or"; conds: Cond[] } | { type: "is_autocommit" };

export interface FakeSqld {
  url: string;
  requests: { path: string; authorization?: string }[];
  db: InstanceType<typeof Database>;
  close(): Promise<void>;
}

function fromProto(v: Value): unknown {
  switch (v.type) {
    case "null":
      return null;
    case "integer":
      return BigInt(v.value);
    case "float":
      return v.value;
    case "text":
      return v.value;
    case "blob":
      return Buffer.from(v.base64, "base64");
  }
}

function toProto(v: unknown): Value {
  if (v === null || v === undefined) return { type: "null" };
  if (typeof v === "bigint") return { type: "integer", value: String(v) };
  if (typeof v === "number") return Number.isInteger(v) ? { type: "integer", value: String(v) } : { type: "float", value: v };
  if (typeof v === "string") return { type: "text", value: v };
  return { type: "blob", base64: Buffer.from(v as Uint8Array).toString("base64") };
}

function errorOf(err: unknown) {
  const e = err as { message?: string; code?: string };
  // sqld names the primary result code (SQLITE_CONSTRAINT), not the extended one.
  const code = typeof e.code === "string" ? e.code.replace(/^(SQLITE_[A-Z]+)_.*$/, "$1") : "UNKNOWN";
  return { message: `SQLite error: ${e.message ?? String(err)}`, code };
}

export async function startFakeSqld(path: string, opts: { authToken?: string } = {}): Promise<FakeSqld> {
  const db = new Database(path);
  const sqlCache = new Map<number, string>();
  const requests: FakeSqld["requests"] = [];

  function execute(stmt: Stmt) {
    const sql = stmt.sql ?? sqlCache.get(stmt.sql_id!)!;
    const prepared = db.prepare(sql);
    const args = (stmt.args ?? []).map(fromProto);
    const named = Object.fromEntries((stmt.named_args ?? []).map((a) => [a.name.replace(/^[:@$]/, ""), fromProto(a.value)]));
    const params = stmt.named_args?.length ? [named] : args;
    if (prepared.reader) {
      prepared.raw(true);
      prepared.safeIntegers(true);
      const cols = prepared.columns().map((c: { name: string; type: string | null }) => ({ name: c.name, decltype: c.type }));
      const rows = (prepared.all(...params) as unknown[][]).map((r) => r.map(toProto));
      return { cols, rows, affected_row_count: 0, last_insert_rowid: null };
    }
    const info = prepared.run(...params);
    return { cols: [], rows: [], affected_row_count: info.changes, last_insert_rowid: String(info.lastInsertRowid) };
  }

  function batch(steps: { stmt: Stmt; condition?: Cond }[]) {
    const results: unknown[] = [];
    const errors: unknown[] = [];
    const holds = (c: Cond): boolean => {
      switch (c.type) {
        case "ok":
          return results[c.step] != null;
        case "error":
          return errors[c.step] != null;
        case "not":
          return !holds(c.cond);
        case "and":
          return c.conds.every(holds);
        case "or":
          return c.conds.some(holds);
        case "is_autocommit":
          return !db.inTransaction;
      }
    };
    steps.forEach((step, i) => {
      results[i] = null;
      errors[i] = null;
      if (step.condition && !holds(step.condition)) return;
      try {
        results[i] = execute(step.stmt);
      } catch (err) {
        errors[i] = errorOf(err);
      }
    });
    return { step_results: results, step_errors: errors };
  }

  function handle(req: { type: string; [k: string]: any }) {
    try {
      switch (req.type) {
        case "close":
          return { type: "ok", response: { type: "close" } };
        case "execute":
          return { type: "ok", response: { type: "execute", result: execute(req.stmt) } };
        case "batch":
          return { type: "ok", response: { type: "batch", result: batch(req.batch.steps) } };
        case "sequence":
          db.exec(req.sql ?? sqlCache.get(req.sql_id)!);
          return { type: "ok", response: { type: "sequence" } };
        case "store_sql":
          sqlCache.set(req.sql_id, req.sql);
          return { type: "ok", response: { type: "store_sql" } };
        case "close_sql":
          sqlCache.delete(req.sql_id);
          return { type: "ok", response: { type: "close_sql" } };
        case "get_autocommit":
          return { type: "ok", response: { type: "get_autocommit", is_autocommit: !db.inTransaction } };
        default:
          return { type: "error", error: { message: `unknown request ${req.type}`, code: "UNKNOWN" } };
      }
    } catch (err) {
      return { type: "error", error: errorOf(err) };
    }
  }

  let batons = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      requests.push({ path: req.url ?? "", authorization: req.headers.authorization });
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (opts.authToken && req.headers.authorization !== `Bearer ${opts.authToken}`) return send(401, { error: "Unauthorized" });
      if (req.method === "GET" && req.url === "/v2") return send(200, {});
      if (req.method !== "POST" || req.url !== "/v2/pipeline") return send(404, { error: "not found" });
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { baton: string | null; requests: { type: string }[] };
      const results = body.requests.map(handle);
      const closed = body.requests.some((r) => r.type === "close");
      send(200, { baton: closed ? null : `b${++batons}`, base_url: null, results });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    db,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => {
          db.close();
          done();
        });
      }),
  };
}
