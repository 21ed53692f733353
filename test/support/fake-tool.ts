import type { IncomingHttpHeaders } from "node:http";
import { listenLoopback, readBody, sendJson } from "./http-server";

export interface ToolCall {
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
}

/**
 * Fake HTTP tools on loopback, one per path: `/weather` answers a forecast,
 * `/big` a result of `bigBytes` bytes, `/slow` never answers, `/echo-auth`
 * echoes the credentials it received and `/echo-url` the path and query it
 * was called at (careless tools).
 */
export async function startFakeTools(opts: { bigBytes: number }) {
  const calls: ToolCall[] = [];
  const server = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "null");
    calls.push({ path: req.url ?? "", headers: req.headers, body });
    switch (req.url?.split("?")[0]) {
      case "/weather":
        return sendJson(res, 200, { city: body.city, forecast: "sunny", days: body.days ?? 1 });
      case "/big":
        return sendJson(res, 200, { blob: "x".repeat(opts.bigBytes) });
      case "/echo-auth":
        return sendJson(res, 200, { you_sent: req.headers["x-api-key"] });
      case "/echo-url":
        return sendJson(res, 200, { path: req.url });
      case "/slow":
        return; // never answers: the host's timeout must end the call
      default:
        return sendJson(res, 404, { error: "no such tool" });
    }
  });
  return { url: server.url, calls, close: server.close };
}
