import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { bodyUnlessBrokenOff } from "./http-server";

export interface RunCall {
  /** The request line as the runner service got it: `POST /runners/{name}/run` (PROTOCOL §3). */
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: any;
  raw: string;
}

/**
 * An ad-hoc runner service on loopback: a manifest for `author/name` with the
 * given runners, and a handler per run request that writes whatever it likes
 * to the raw response (good NDJSON, garbage, nothing at all).
 */
export async function startAdHocRunner(opts: {
  author?: string;
  name: string;
  runners?: Record<string, unknown>[];
  onRun: (call: RunCall, res: ServerResponse) => void | Promise<void>;
}): Promise<{ url: string; calls: RunCall[]; runnerId: (runner?: string) => string; close(): Promise<void> }> {
  const calls: RunCall[] = [];
  const author = opts.author ?? "tests";
  const manifest = {
    protocol: "agent-runner/v1",
    author,
    name: opts.name,
    version: "0.0.1",
    runners: opts.runners ?? [{ name: "default", label: { en_US: opts.name }, capabilities: { streaming: true }, permissions: { history: ["page"], events: ["get", "page"] } }],
  };
  const server = createServer(async (req, res) => {
    if (req.method === "GET" && req.url === "/manifest") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(manifest));
      return;
    }
    const body = await bodyUnlessBrokenOff(req);
    // Broken off by the host (disposed mid-request): nothing to answer.
    if (!body) return;
    const raw = body.toString("utf8");
    const call = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: JSON.parse(raw), raw };
    calls.push(call);
    try {
      await opts.onRun(call, res);
    } catch (err) {
      // A run still calling back while its test disposes the host: the runner crashes its run, as a real one would.
      if (!hostUnreachable(err)) throw err;
      res.destroy();
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls,
    runnerId: (runner = "default") => `http:${author}/${opts.name}/${runner}`,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** undici's answer when the host's socket is refused or closed under a call. */
function hostUnreachable(err: unknown): boolean {
  return err instanceof TypeError && err.message === "fetch failed";
}

/** NDJSON writer for a run: numbered results in order. */
export function resultWriter(res: ServerResponse, runId: string) {
  let sequence = 0;
  res.writeHead(200, { "content-type": "application/x-ndjson" });
  return {
    send(type: string, data: unknown, seq = ++sequence) {
      res.write(`${JSON.stringify({ run_id: runId, type, data, sequence: seq })}\n`);
    },
    reply(content: string | Record<string, unknown>[]) {
      this.send("message.completed", { message: { role: "assistant", content } });
      this.send("run.completed", { finish_reason: "stop" });
      res.end();
    },
  };
}

/** An `onRun` that answers with the config its run was given. */
export const echoConfig = ({ body }: RunCall, res: ServerResponse) => resultWriter(res, body.context.run_id).reply(JSON.stringify(body.context.config));
