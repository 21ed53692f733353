import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface LoopbackServer {
  url: string;
  close(): Promise<void>;
}

export async function readBody(req: IncomingMessage): Promise<string> {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  return raw;
}

/** The request's body, or null when the client broke the request off (a body that failed mid-stream, a host disposed mid-request). */
export async function bodyUnlessBrokenOff(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of req) chunks.push(chunk as Buffer);
  } catch {
    return null;
  }
  return Buffer.concat(chunks);
}

export function sendJson(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/**
 * A 200 whose body starts and then stalls: headers and `part` at once, then nothing until the client lets go
 * (`onClosed` is told), or, with `trickleMs`, `rest` one byte at a time at that pace (a provider that trickles).
 */
export function sendPartThenStall(res: ServerResponse, contentType: string, part: string, opts: { rest?: string; trickleMs?: number; onClosed?: () => void } = {}) {
  res.writeHead(200, { "content-type": contentType });
  res.write(part);
  let at = 0;
  const rest = opts.rest ?? "";
  const ticker = opts.trickleMs ? setInterval(() => (at < rest.length ? res.write(rest[at++]) : res.end()), opts.trickleMs) : undefined;
  res.on("close", () => {
    clearInterval(ticker);
    if (!res.writableFinished) opts.onClosed?.();
  });
}

/** A plain HTTP server on 127.0.0.1 (a fake of something outside the host). */
export async function listenLoopback(handler: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>): Promise<LoopbackServer> {
  const server: Server = createServer((req, res) => {
    Promise.resolve(handler(req, res)).catch((err) => {
      if (!res.headersSent) sendJson(res, 500, { error: String(err) });
      else res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** An answer whose status line is no HTTP: workerd's fetch rejects it with its opaque "internal error; reference = …". */
export const MALFORMED_STATUS_LINE = "NOT HTTP AT ALL\r\n\r\n";
/** A 200 whose chunked body is no HTTP framing (its first chunk size is not hex): reading the body fails as opaquely. */
export const BROKEN_CHUNKED_BODY = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n";

/** A server on 127.0.0.1 that reads each request whole, then writes `raw` on its connection as it is and closes it. */
export function listenAnsweringRaw(raw: string): Promise<LoopbackServer> {
  return listenLoopback(async (req) => {
    await readBody(req);
    req.socket.end(raw);
  });
}
