import { listenLoopback, readBody, sendJson } from "./http-server";

/**
 * A fake retrieval endpoint on loopback: `{query, top_k}` in, `{entries}` out.
 * It returns more entries than asked (unordered), so the host's cap shows,
 * and never answers the query "hang".
 */
export async function startFakeRetrieval(opts: { apiKey: string }) {
  const calls: { authorization: string | undefined; body: any }[] = [];
  const server = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    calls.push({ authorization: req.headers.authorization, body });
    if (req.headers.authorization !== `Bearer ${opts.apiKey}`) return sendJson(res, 401, { error: "bad key" });
    if (body.query === "hang") return;
    const entries = Array.from({ length: 30 }, (_, i) => ({ content: `${body.query} passage ${i}`, score: ((i * 7) % 30) / 30, metadata: { doc: `d${i}` } }));
    return sendJson(res, 200, { entries });
  });
  return { url: server.url, calls, close: server.close };
}
