import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner, putAgent } from "../support/scripted-runner";

/**
 * A body sent without a Content-Length (chunked) that outgrows a route's limit is a 413 (README "HTTP API":
 * admin bodies over 1 MiB, events over MAX_EVENT_BODY_BYTES, Host API bodies over MAX_API_BODY_BYTES).
 * When it is only a little over (well within the 4 MiB drain bound), the client must read that 413, as it does
 * for a declared length and for a chunked upload, instead of a connection reset.
 */
const MiB = 1024 * 1024;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

/** A chunked POST of `n` bytes of spaces (whitespace a JSON parser skips: only the size is wrong), as fast as the socket takes them. */
function send(url: string, method: string, token: string, n: number): Promise<number | string> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const req = request({ host: u.hostname, port: u.port, method, path: u.pathname, headers: { authorization: `Bearer ${token}`, "transfer-encoding": "chunked" }, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode!));
      res.on("error", (err) => resolve(`transport error: ${err}`));
    });
    req.on("error", (err) => resolve(`transport error: ${err}`));
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const pump = () => {
      while (sent < n) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once("drain", pump);
      }
      req.end();
    };
    pump();
  });
}

/** The same through fetch (undici), from a paced stream: how a runner in Node sends a body it produces as it goes. */
async function sendFetch(url: string, token: string, n: number): Promise<number | string> {
  let at = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (at >= n) return c.close();
      c.enqueue(new Uint8Array(64 * 1024).fill(0x20));
      at += 64 * 1024;
      await new Promise((r) => setTimeout(r, 1));
    },
  });
  try {
    const res = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${token}` }, body, duplex: "half" } as RequestInit);
    await res.text();
    return res.status;
  } catch (err) {
    return `transport error: ${String((err as Error)?.cause ?? err)}`;
  }
}

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "chunked-limits" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "chunked-limits", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a chunked body a little over a route's limit", () => {
  it("is answered 413 on the admin API, every time", async () => {
    const out = [];
    for (let i = 0; i < 20; i++) out.push(await send(`${host.url}/v1/admin/agents`, "POST", ADMIN_TOKEN, 3 * MiB));
    expect(out).toEqual(Array(20).fill(413));
  });

  it("is answered 413 on POST /v1/events, every time", async () => {
    const out = [];
    for (let i = 0; i < 20; i++) out.push(await send(`${host.url}/v1/events`, "POST", ADMIN_TOKEN, 3 * MiB));
    expect(out).toEqual(Array(20).fill(413));
  });

  it("is answered 413 by the Host API, every time", async () => {
    const { result } = await runner.run(host, "chunked-api", async (_api, ctx) => {
      const out = [];
      for (let i = 0; i < 12; i++) {
        out.push(await send(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, "POST", ctx.runtime.api.token, 2.5 * MiB));
        out.push(await sendFetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, ctx.runtime.api.token, 2.5 * MiB));
      }
      return out;
    });
    expect(result).toEqual(Array(24).fill(413));
  });
});
